"""One router per resource: answers, papers, service, and the OpenAI-compatible /v1."""
