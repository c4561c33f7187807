"""Settings: the one place that reads the environment."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag.errors import InputError

_DURATION = re.compile(r"-?(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")  # Go's time.ParseDuration
_SECONDS = re.compile(r"-?\d+(?:\.\d+)?")


class Settings(BaseSettings):
    """Every knob of rag; each field is also an environment variable `RAG_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="RAG_", extra="ignore")

    # Storage
    home: Path = Field(default_factory=lambda: default_home(), description="Data directory for "
                       "the indexes: the user's data folder (`~/.local/share/rag` on Linux, under "
                       "`XDG_DATA_HOME` when set), or `./.rag` where an earlier rag made one.")
    index: str = Field("default", description="Name of the corpus index (separate corpora side by side).")
    chroma_url: str | None = Field(
        None, description="URL of a Chroma server (`chroma run`); unset: embedded store under home."
    )
    model_cache: Path = Field(
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rag",
        description="Where the embedding model's one-time ONNX export is kept.",
    )
    max_file_mb: int = Field(20, ge=1, le=4096, description="Largest file `rag ingest` reads, in MB "
                             "(counted as read, so FIFOs and devices cannot exceed it).")
    seeds: Path = Field(Path("seeds"), description="What `rag ask`/`rag search` ingest into an empty index.")

    # Chunking and embedding (both are part of the index fingerprint)
    chunk_size: int = Field(200, ge=16, le=2048, description="Chunk size in model tokens for the sentence splitter.")
    chunk_overlap: int = Field(30, ge=0, description="Token overlap between neighbouring chunks "
                               "(less than the chunk size).")
    embed_batch: int = Field(32, ge=1, le=4096, description="Texts per embedding batch.")
    embed_threads: int = Field(0, ge=0, le=1024, description="onnxruntime intra-op threads (0: all cores).")
    embed_precision: Literal["int8", "fp32"] = Field(
        "int8",
        description="The embedding model's weights on the CPU: int8 (8-bit weights, vectors "
        "within cosine 0.998 of fp32's; faster) or fp32. Either reads any index.",
    )
    chunk_vectors: Literal["model", "sentences"] = Field(
        "model",
        description="How ingest makes a chunk's vector: model (the model reads the chunk) or "
        "sentences (pooled from the token states of the title and sentences the model reads "
        "anyway: half the model's work, SciFact hybrid nDCG@10 -0.004, fewer unanswerable "
        "questions declined). Part of the index fingerprint; unset, an existing index keeps "
        "the kind it was built with.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="Where ingest embeds: auto (a GPU when a CUDA build of torch sees one, "
        "else the CPU), cpu, or cuda. Queries embed on the CPU.",
    )

    # Retrieval
    k: int = Field(8, ge=1, le=50, description="Papers passed to the answerer by default (1..50).")

    # Generation
    llm: Literal["auto", "ollama", "openai", "none"] = Field(
        "auto", description="auto (the model server when it answers, else offline: the "
        "OpenAI-compatible one when RAG_OPENAI_BASE_URL is set, else Ollama), ollama, openai "
        "(an OpenAI-compatible server: llama.cpp, LM Studio, vLLM), or none (offline).")
    model: str = Field("llama3.2", description="Model name (Ollama's; for an OpenAI-compatible "
                       "server, unset takes the first model it lists).")
    ollama_host: str = Field(
        "http://127.0.0.1:11434",
        validation_alias=AliasChoices("OLLAMA_HOST", "RAG_OLLAMA_HOST"),
        description="Ollama server URL (OLLAMA_HOST, as for the ollama CLI).",
    )
    openai_base_url: str | None = Field(
        None, description="Base URL of an OpenAI-compatible server, ending in /v1 (e.g. "
        "http://127.0.0.1:8080/v1 for llama.cpp's llama-server).")
    openai_api_key: str | None = Field(None, description="API key sent to that server, if it asks for one.")
    num_ctx: int = Field(8192, ge=512, le=1_048_576, description="Context window requested from "
                         "Ollama (and assumed for a server that does not say its own).")
    llm_timeout: float = Field(120.0, gt=0, le=86_400, description="Seconds to wait for each "
                               "reply of the model server (connect, and every read) before giving up.")
    answer_timeout: float = Field(300.0, gt=0, le=86_400, description="Seconds one whole answer "
                                  "may take, every model call in it together (a follow-up's "
                                  "rewrite, the answer, the model judge), whatever the server "
                                  "sends meanwhile; the model is stopped there and the answer "
                                  "marked incomplete.")
    think: bool | Literal["low", "medium", "high"] | None = Field(
        None, description="Ollama's `think` option: unset (not sent), true/false, or low/medium/high "
        "for models that take levels. Reasoning is never part of the answer either way.",
    )
    keep_alive: str | float | None = Field(
        None, description="How long Ollama keeps the model loaded after an answer (Ollama's "
        "keep_alive: `10m`, `1h`, seconds, `-1` forever, `0` unload at once); unset: Ollama's default.",
    )
    temperature: float = Field(0.0, ge=0, le=2, description="The model's sampling temperature "
                               "(0: the same answer to the same question and sources).")
    num_predict: int | None = Field(
        None, description="Most tokens the model may write per answer (-1: as many as its "
        "context holds); an answer cut there is marked incomplete. Unset: 256 plus 40 per "
        "source, always within the model's context.",
    )

    # Output
    log_level: str = Field(
        "info", description="debug, info (with progress), warning or error; `rag -v`/`-q` move it."
    )

    # Service (RAG_SERVER_URL, for the thin client, is read by rag/client.py itself)
    api_key: str | None = Field(None, description="Bearer token required by `rag serve` when set.")
    cors_origins: str = Field("", description="Comma-separated origins allowed by CORS.")
    allowed_hosts: str = Field("", description="Comma-separated extra Host names `rag serve` answers "
                               "when no API key is set (localhost and its own address always; `*`: any).")
    max_body_kb: int = Field(1024, ge=1, le=1_048_576, description="Largest request body, in KB "
                             "(refused with 413 before it is parsed).")
    # An MCP session holds about 18 KB until it ends (benchmarks/mcp_sessions.py); sessions a
    # client never ended (DELETE /mcp) were held for 30 minutes, up to 10,000 (the SDK's own).
    mcp_max_sessions: int = Field(100, ge=1, le=100_000, description="Most /mcp sessions "
                                  "`rag serve` keeps open at once; one more is refused (503).")
    mcp_session_idle_s: float = Field(600.0, gt=0, le=86_400, description="Seconds an /mcp "
                                      "session may go without a request before it is closed "
                                      "(its client opens a new one, as the protocol says).")

    @field_validator("keep_alive")
    @classmethod
    def _keep_alive(cls, value: str | float | None) -> str | float | None:
        if value is None or isinstance(value, float):
            return value
        if _DURATION.fullmatch(value.strip()):
            return value.strip() if value else value
        if _SECONDS.fullmatch(value.strip()):
            return float(value)  # Ollama reads a bare number as seconds, a string as a duration
        raise ValueError("expected a duration such as 10m, 1h30m, 300 (seconds), -1 or 0")

    @field_validator("ollama_host")
    @classmethod
    def _ollama_host(cls, value: str) -> str:
        # Parsed here as the ollama client parses it (a scheme is optional), so a bad host is
        # a named setting error, not a ValueError traceback from inside the client.
        if not value.strip():
            return "http://127.0.0.1:11434"  # as the ollama client reads an empty one
        scheme, sep, _ = value.partition("://")
        try:
            if value != value.strip():
                raise ValueError("spaces around it")
            if sep and scheme.lower() not in ("http", "https"):
                raise ValueError(f"the scheme {scheme}:// is not http:// or https://")
            if urlsplit(value if sep else f"http://{value}").port == 0:
                raise ValueError("port 0 is not a port Ollama listens on")
        except ValueError as exc:
            raise ValueError(f"not a usable URL ({exc}); expected http://HOST:PORT, "
                             "e.g. http://127.0.0.1:11434") from None
        return value

    @field_validator("openai_base_url")
    @classmethod
    def _openai_base_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        try:
            port = parts.port
        except ValueError:
            port = 0
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname or port == 0:
            raise ValueError("not a usable URL; expected http://HOST:PORT/v1, e.g. "
                             "http://127.0.0.1:8080/v1")
        return value.strip().rstrip("/")

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, value: str | None) -> str | None:
        # A client strips the key it sends (HTTP trims header values): a key with spaces
        # around it could never match, and every request would be refused.
        if value is not None and value != value.strip():
            raise ValueError("the key has spaces or line breaks around it; remove them")
        return value

    @field_validator("num_predict")
    @classmethod
    def _num_predict(cls, value: int | None) -> int | None:
        if value is not None and value <= 0 and value != -1:
            raise ValueError("expected a positive number of tokens, or -1 for no limit")
        return value

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Settings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"RAG_CHUNK_OVERLAP={self.chunk_overlap} must be less than "
                             f"RAG_CHUNK_SIZE={self.chunk_size}")
        return self

    @field_validator("home")
    @classmethod
    def _home(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file, not a directory: point RAG_HOME at a directory")
        if value.is_dir() and value.stat().st_uid != os.getuid():
            raise ValueError(f"{value} belongs to another user: rag keeps its index only in a "
                             "directory of its own user")
        return value

    @field_validator("model_cache")
    @classmethod
    def _model_cache(cls, value: Path) -> Path:
        # checked here so a bad path is a named setting error, not a traceback at export time
        parent = value
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or (parent != value and not os.access(parent, os.W_OK)):
            raise ValueError(f"{value} cannot be created (not a writable directory: {parent})")
        return value

    @property
    def index_dir(self) -> Path:
        return self.home / "chroma"


LEGACY_HOME = Path(".rag")  # where rag kept its data before it used the user's data folder


def default_home() -> Path:
    """The user's data folder (platformdirs: ~/.local/share/rag on Linux, honouring
    XDG_DATA_HOME), the same from any folder; an existing ./.rag of an earlier rag is kept, so
    that no index is lost on upgrade (`rag` says so once)."""
    if LEGACY_HOME.is_dir():
        return LEGACY_HOME
    from platformdirs import user_data_dir

    return Path(user_data_dir("rag", appauthor=False))


def env_name(field: str) -> str:
    """The environment variable that sets a Settings field."""
    # a validation error names the field by its first alias, OLLAMA_HOST
    return "OLLAMA_HOST" if field in ("ollama_host", "OLLAMA_HOST") else f"RAG_{field.upper()}"


def _shown(field: str, value: object) -> str:
    return "(hidden)" if field == "api_key" else repr(value)  # a secret stays out of messages


@lru_cache
def get_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{env_name(str(e['loc'][0]))}={_shown(str(e['loc'][0]), e.get('input'))}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            if e["loc"]
            else e["msg"].removeprefix("Value error, ") for e in exc.errors()
        )
        raise InputError(f"bad setting: {problems}",
                         "fix or unset that environment variable (docs/reference/configuration.md)") from None
