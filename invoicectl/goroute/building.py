"""Building a request: ``httpx.AsyncClient.build_request`` without its per-request merging.

build_request merges the base URL, the client's headers and its cookie jar again for every
request: for a send to the emulator on loopback that was a fifth of the HTTP client's own
CPU. Here the URL of a fixed path is merged once per client (by build_request itself, so it
is the URL build_request would make), the client's headers are copied, and no cookie is
sent (GoRoute sets none). The timeouts stay the client's: httpx sets them as it sends.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import httpx


class RequestBuilder:
    """Requests for one ``GoRouteClient``; a path outside ``fixed_paths`` (one with an id in
    it) or a request with query parameters goes through build_request as before."""

    def __init__(self, fixed_paths: Collection[str]) -> None:
        self._fixed = fixed_paths
        self._urls: dict[str, httpx.URL] = {}

    def build(
        self,
        http: httpx.AsyncClient,
        method: str,
        path: str,
        content: bytes | None,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
    ) -> httpx.Request:
        if params is not None or path not in self._fixed:
            return http.build_request(method, path, content=content, params=params, headers=headers)
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = http.build_request(method, path).url
        merged = http.headers.copy()
        if headers:
            merged.update(headers)
        return httpx.Request(method, url, headers=merged, content=content)
