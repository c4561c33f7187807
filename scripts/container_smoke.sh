#!/usr/bin/env bash
# Smoke-test the Dockerfile with podman on a machine with no Docker engine and no container
# registry (see ../shared/CONTAINERS.md). Run by hand, as root (or with sudo), not from CI:
#
#   scripts/container_smoke.sh
#
# 1. installs podman buildah runc debootstrap when missing;
# 2. makes the base image localhost/debian-bookworm:minbase with debootstrap, once;
# 3. builds the image from a temporary build context (the project); the host's CA bundle
#    reaches pip through a pip.conf mounted into the build only (the Dockerfile knows nothing
#    of it);
# 4. checks `rag ask --llm none` in a container without network, then runs the service and
#    checks GET /health, POST /ask (citations include Skrull), GET / and the HEALTHCHECK;
# 5. stops and removes the container and the temporary files (the image is kept).
#
# Environment: IMAGE (default localhost/rag:smoke), BASE_IMAGE (default
# localhost/debian-bookworm:minbase), CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt), PORT (default: a free one),
# HEALTH_TIMEOUT seconds (default 180), NO_CACHE=1 to build without podman's layer cache,
# SKIP_BUILD=1 to test an existing IMAGE.
# Exit status: 0 when every check passed, 1 otherwise.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${IMAGE:-localhost/rag:smoke}
BASE_IMAGE=${BASE_IMAGE:-localhost/debian-bookworm:minbase}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-180}
QUESTION="which systems target long-sequence training?"
# runc: podman's default runtime fails here with a cgroups error; the ulimits as CONTAINERS.md.
podman=(podman --runtime runc)
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
# No systemd here to time the HEALTHCHECK: it is run by hand (podman healthcheck run) instead.
run_opts=("${limits[@]}" --health-interval=disable)

t0=$SECONDS
step() { printf '\n==> [%4ss] %s\n' $((SECONDS - t0)) "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
fail() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }
# podman, minus its complaints that there is no systemd to time healthchecks with
pm() { "${podman[@]}" "$@" 2> >(grep -v 'systemd connection' >&2); }

as_root=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || fail "run as root (podman here is used rootful)"
  as_root=(sudo)
  podman=(sudo "${podman[@]}")
fi

tmp=$(mktemp -d /tmp/rag-container-smoke.XXXXXX)
container=""
cleanup() {
  local status=$?
  if [ -n "$container" ]; then
    pm rm -f -t 5 "$container" >/dev/null 2>&1 || true
  fi
  "${as_root[@]}" rm -rf "$tmp"
  if [ $status = 0 ]; then echo "container smoke test: PASSED"; else echo "container smoke test: FAILED" >&2; fi
}
trap cleanup EXIT

# -- 1. tools ---------------------------------------------------------------------------------
step "tools: podman buildah runc debootstrap"
missing=()
for tool in podman buildah runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "    installing ${missing[*]} with apt-get"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    podman buildah runc debootstrap >/dev/null
fi
ok "$(podman --version), runc $(runc --version | awk 'NR==1{print $3}')"

# -- 2. base image ----------------------------------------------------------------------------
step "base image $BASE_IMAGE"
if "${podman[@]}" image exists "$BASE_IMAGE"; then
  ok "present"
else
  # The Debian mirror apt uses on this machine (deb822 or one-line sources).
  mirror=$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
             | grep -v security | head -n 1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "    debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  "${as_root[@]}" debootstrap --variant=minbase bookworm "$tmp/rootfs" "$mirror" > "$tmp/debootstrap.log" 2>&1 \
    || { tail -n 20 "$tmp/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
  "${as_root[@]}" tar -C "$tmp/rootfs" -c . | "${podman[@]}" import - "$BASE_IMAGE" >/dev/null
  "${as_root[@]}" rm -rf "$tmp/rootfs"
  ok "imported"
fi

# -- 3. build ---------------------------------------------------------------------------------
if [ "${SKIP_BUILD:-0}" = 1 ]; then
  step "build skipped (SKIP_BUILD=1); using $IMAGE"
  "${podman[@]}" image exists "$IMAGE" || fail "no image $IMAGE"
else
  step "build context in $tmp/context"
  mkdir -p "$tmp/context" "$tmp/pip"
  # The project as the build would see it (.dockerignore still applies to this copy).
  tar -C "$repo" --exclude=./.git --exclude=./.venv --exclude=./.rag --exclude=./wheels \
      --exclude=./.mypy_cache --exclude=./.ruff_cache --exclude=./.hypothesis \
      --exclude='__pycache__' -c . | tar -C "$tmp/context" -x
  # pip inside the build fails TLS verification without the host's CA bundle. Mounted at
  # build time only (podman build -v): /etc/xdg/pip/pip.conf is one of pip's global configs.
  build_mounts=()
  [ "${NO_CACHE:-0}" = 1 ] && build_mounts+=(--no-cache)
  if [ -f "$CA_BUNDLE" ]; then
    cp "$CA_BUNDLE" "$tmp/pip/ca-bundle.crt"
    printf '[global]\ncert = /etc/xdg/pip/ca-bundle.crt\n' > "$tmp/pip/pip.conf"
    build_mounts+=(-v "$tmp/pip:/etc/xdg/pip:ro")
    ok "CA bundle for pip: $CA_BUNDLE"
  fi

  step "podman build -t $IMAGE (BASE=$BASE_IMAGE)"
  old_id=$("${podman[@]}" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  build_start=$SECONDS
  # --format docker: the OCI format drops HEALTHCHECK. --network host: the build's apt-get
  # and pip reach the registries as the host does.
  "${podman[@]}" build --format docker --network host "${limits[@]}" "${build_mounts[@]}" \
      --build-arg BASE="$BASE_IMAGE" -t "$IMAGE" "$tmp/context" 2>&1 \
    | tee "$tmp/build.log" | sed -u 's/^/    | /' \
    || fail "podman build failed"
  build_seconds=$((SECONDS - build_start))
  rm -rf "$tmp/context"
  ok "built in ${build_seconds}s"
  # The image this build replaced, now untagged: remove it (nothing else of ours is touched).
  if [ -n "$old_id" ] && [ "$old_id" != "$("${podman[@]}" image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    "${podman[@]}" rmi "$old_id" >/dev/null 2>&1 && ok "removed the previous $IMAGE (${old_id:0:12})" || true
  fi
fi
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$IMAGE")
ok "image $IMAGE: $((size / 1000000)) MB"

# -- 4a. the image, without network -----------------------------------------------------------
step "image checks: user, no torch, CUDA-free"
pm run --rm "${run_opts[@]}" --network none "$IMAGE" sh -c '
  set -e
  test "$(id -u)" != 0 || { echo "runs as root"; exit 1; }
  for m in torch transformers sentence_transformers; do
    if python -c "import $m" 2>/dev/null; then echo "$m is in the image"; exit 1; fi
  done
  if python -m pip list 2>/dev/null | grep -i "^nvidia-"; then echo "nvidia packages installed"; exit 1; fi
  ls -l "$RAG_MODEL_CACHE"
  echo "user $(id -un), RAG_HOME=$RAG_HOME, OLLAMA_HOST=$OLLAMA_HOST"
' | sed 's/^/    /' || fail "image checks"
ok "non-root, no torch, transformers or sentence-transformers (the ONNX graph is built in), no nvidia packages"

step "podman run $IMAGE rag ask --llm none \"$QUESTION\" (no network)"
pm run --rm "${run_opts[@]}" --network none "$IMAGE" \
    rag ask --llm none "$QUESTION" > "$tmp/ask.txt" 2> "$tmp/ask.err" \
  || { cat "$tmp/ask.err" >&2; fail "rag ask failed in the container"; }
sed 's/^/    /' "$tmp/ask.txt"
grep -q "index 'default' is empty" "$tmp/ask.err" && fail "the image has no seeds index (it ingested at run time)"
grep -q '\] Skrull' "$tmp/ask.txt" || fail "rag ask did not cite Skrull"
ok "answered from the index built into the image, citing Skrull"

# -- 4b. the service --------------------------------------------------------------------------
PORT=${PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
name="rag-smoke-$$"
step "podman run -d -p 127.0.0.1:$PORT:8000 $IMAGE (rag serve)"
if container=$(pm run -d --name "$name" "${run_opts[@]}" -p "127.0.0.1:$PORT:8000" "$IMAGE" 2> "$tmp/run.err"); then
  ok "container $name, published on 127.0.0.1:$PORT"
else
  # Without a working container network, fall back to the host's network on a free port.
  sed 's/^/    /' "$tmp/run.err"
  pm rm -f "$name" >/dev/null 2>&1 || true
  echo "    -p failed; falling back to --network host with rag serve --port $PORT"
  container=$(pm run -d --name "$name" "${run_opts[@]}" --network host "$IMAGE" \
      rag serve --host 127.0.0.1 --port "$PORT") || fail "podman run failed"
  ok "container $name on the host network, port $PORT (HEALTHCHECK targets 8000: not checked)"
  no_healthcheck=1
fi
url="http://127.0.0.1:$PORT"

step "waiting for $url/health (up to ${HEALTH_TIMEOUT}s)"
deadline=$((SECONDS + HEALTH_TIMEOUT))
until python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" "$url/health" 2>/dev/null; do
  state=$("${podman[@]}" inspect --format '{{.State.Status}}' "$container" 2>/dev/null || echo gone)
  if [ "$state" != running ]; then
    "${podman[@]}" logs "$container" 2>&1 | tail -n 30 | sed 's/^/    | /' >&2
    fail "the container stopped ($state) before /health answered"
  fi
  if [ $SECONDS -ge $deadline ]; then
    "${podman[@]}" logs "$container" 2>&1 | tail -n 30 | sed 's/^/    | /' >&2
    fail "/health did not answer within ${HEALTH_TIMEOUT}s"
  fi
  sleep 2
done
ok "up after $((SECONDS - deadline + HEALTH_TIMEOUT))s"

step "GET /health, POST /ask, GET /"
python3 - "$url" "$QUESTION" <<'PY' || fail "HTTP checks"
import json
import sys
import urllib.request

url, question = sys.argv[1], sys.argv[2]


def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.status, resp.headers.get("content-type", ""), resp.read()


status, ctype, raw = call("/health")
health = json.loads(raw)
print("    /health:", json.dumps(health))
assert status == 200, status
assert health.get("status") == "ok", "status is not ok"
assert health.get("papers", 0) >= 60, f"expected the 60 seed papers, got {health.get('papers')}"
print(f"    ok: /health status ok, {health['papers']} papers, {health.get('chunks')} chunks")

status, ctype, raw = call("/ask", {"question": question, "llm": "none"})
ask = json.loads(raw)
assert status == 200, status
titles = [c.get("title") or c.get("label") for c in ask.get("citations", [])]
print("    /ask answer:")
for line in ask.get("answer", "").splitlines():
    print("      " + line)
print("    /ask citations:", titles, "| answerer:", ask.get("answerer"))
assert ask.get("answerer") == "extractive", ask.get("answerer")
assert not ask.get("abstained"), "the answer abstained"
assert any("Skrull" in (t or "") for t in titles), "Skrull is not cited"
print(f"    ok: /ask cites {len(titles)} papers including Skrull")

status, ctype, raw = call("/")
assert status == 200 and "html" in ctype, (status, ctype)
print(f"    ok: / serves the chat page ({len(raw)} bytes of {ctype.split(';')[0]})")
PY

if [ -z "${no_healthcheck:-}" ]; then
  step "HEALTHCHECK (podman healthcheck run)"
  "${podman[@]}" healthcheck run "$container" || fail "the image's HEALTHCHECK failed"
  ok "healthy"
fi

step "stop and remove the container"
pm stop -t 10 "$container" >/dev/null
pm rm "$container" >/dev/null
container=""
ok "removed"
echo
echo "image $IMAGE: $((size / 1000000)) MB${build_seconds:+, built in ${build_seconds}s}"
