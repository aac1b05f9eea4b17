"""Talking to GoRoute: the HTTP client, how its answers are read, the transactions API,
the rate limiter, the retry policy and the API key."""
