"""A TCP relay to run as its own process (``python tcprelay.py TARGET_PORT``): it prints the
port it listens on, then relays each connection to ``127.0.0.1:TARGET_PORT``. Stopped with
SIGSTOP, its connections stay open and take what is sent (the kernel acknowledges it) but
never answer: a frozen proxy, or a network cut as the client sees it."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def main(target_port: int) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", target_port))
        threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
        threading.Thread(target=_pipe, args=(server, client), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]))
