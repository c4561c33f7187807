"""The relay mode of the Ollama-protocol test server: Ollama's /api/* answered with real
generations from llama.cpp's server (tests/llama_server.py).

What it does as Ollama does:
- the prompt is the GGUF's own chat template applied to the messages (llama.cpp's
  /apply-template), tokenized by the model's own tokenizer (/tokenize);
- a prompt longer than `num_ctx` is cut as Ollama cuts it: the first `num_keep` (4) tokens
  are kept and the rest taken from the end so that the prompt fills half the context (the
  system prompt and the first sources are lost);
- `num_predict`, `temperature`, `seed` and `format` (a JSON schema: structured output) are
  honoured; `done_reason` ("stop" or "length"), `prompt_eval_count` (the prompt's tokens as
  read, after any cut) and `eval_count` are the server's real counts;
- /api/show gives the GGUF's template, details and `<arch>.context_length` (the context
  llama.cpp was started with, which is the model's own, 8192).

Where it differs from Ollama (none of it is something rag relies on):
- one model only, under the names in `OllamaTestServer.models`; no /api/pull, /api/embed;
- generation stops at the end of the context with done_reason "length", where Ollama shifts
  the context (drops half of it) and goes on writing until num_predict;
- `think` is ignored (SmolLM2 does not reason); `keep_alive` is ignored (the model stays);
- durations are llama.cpp's timings, not Ollama's load/eval split;
- requests are served one at a time (llama.cpp runs one slot).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

NUM_KEEP = 4  # Ollama's default num_keep
DEFAULT_NUM_CTX = 2048  # Ollama's default context when a request does not set num_ctx


def ollama_truncate(tokens: list[int], num_ctx: int, num_keep: int = NUM_KEEP) -> list[int]:
    """The prompt Ollama's runner keeps of one longer than the context: the first num_keep
    tokens, then the end, half a context in all."""
    if len(tokens) <= num_ctx:
        return tokens
    tail = max(num_ctx // 2 + 2 - num_keep, 1)
    return tokens[:num_keep] + tokens[-tail:]


class Relay:
    """Answers Ollama's chat and show requests with llama.cpp's server at `url`."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=600)
        props = self.client.get("/props").json()
        self.template = str(props.get("chat_template") or "")
        self.context = int(props["default_generation_settings"]["n_ctx"])

    def close(self) -> None:
        self.client.close()

    def show(self, name: str) -> dict[str, Any]:
        return {
            "license": "Apache-2.0 (SmolLM2-135M-Instruct, relayed from llama.cpp)",
            "modelfile": f"# relayed by OllamaTestServer\nFROM {name}\n",
            "parameters": 'stop                           "<|im_end|>"',
            "template": self.template,
            "details": {"parent_model": "", "format": "gguf", "family": "llama",
                        "families": ["llama"], "parameter_size": "135M",
                        "quantization_level": "Q4_1"},
            "model_info": {"general.architecture": "llama",
                           "general.parameter_count": 134515008,
                           "llama.context_length": self.context},
            "capabilities": ["completion"],
            "modified_at": "2026-11-27T00:00:00Z",
        }

    def prompt_tokens(self, path: str, body: dict[str, Any]) -> list[int]:
        """The request's prompt as the model reads it, cut to num_ctx as Ollama cuts it."""
        if path == "/api/chat":
            prompt = self.client.post("/apply-template",
                                      json={"messages": body.get("messages") or []}).json()["prompt"]
        else:
            prompt = str(body.get("prompt") or "")
        tokens = self.client.post("/tokenize", json={"content": prompt, "add_special": False,
                                                     "parse_special": True}).json()["tokens"]
        options = body.get("options") or {}
        num_ctx = min(int(options.get("num_ctx") or DEFAULT_NUM_CTX), self.context)
        return ollama_truncate(tokens, num_ctx, int(options.get("num_keep") or NUM_KEEP))

    def generate(self, path: str, body: dict[str, Any]):  # type: ignore[no-untyped-def]
        """Yield (text, None) pieces as llama.cpp writes them, then (None, final counts)."""
        options = body.get("options") or {}
        tokens = self.prompt_tokens(path, body)
        num_ctx = min(int(options.get("num_ctx") or DEFAULT_NUM_CTX), self.context)
        room = max(num_ctx - len(tokens), 1)
        limit = options.get("num_predict")
        n_predict = room if limit in (None, -1, -2) else min(int(limit), room)
        request: dict[str, Any] = {
            "prompt": tokens, "n_predict": n_predict, "stream": True, "cache_prompt": True,
            "temperature": float(options.get("temperature", 0.8)),
            "seed": int(options.get("seed", -1)), "n_keep": 0,
        }
        fmt = body.get("format")
        if isinstance(fmt, dict):
            request["json_schema"] = fmt
        elif fmt == "json":
            request["json_schema"] = {}
        started = time.monotonic_ns()
        predicted, evaluated, stop_type = 0, len(tokens), "eos"
        with self.client.stream("POST", "/completion", json=request) as reply:
            reply.raise_for_status()
            for line in reply.iter_lines():
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("content"):
                    yield event["content"], None
                predicted = int(event.get("tokens_predicted") or predicted)
                evaluated = int(event.get("tokens_evaluated") or evaluated)
                if event.get("stop"):
                    stop_type = str(event.get("stop_type") or ("limit" if predicted >= n_predict else "eos"))
        total = max(time.monotonic_ns() - started, 1)
        yield None, {
            "done_reason": "length" if stop_type == "limit" else "stop",
            "total_duration": total, "load_duration": 0,
            "prompt_eval_count": evaluated, "prompt_eval_duration": total // 2,
            "eval_count": predicted, "eval_duration": total // 2,
        }
