#!/usr/bin/env bash
# Installs what building, testing and the demo need on a Debian/Ubuntu machine that has only the
# Rust toolchain: a C/C++ toolchain, cmake and libclang (llama.cpp, built through llama-cpp-2),
# valgrind (the C API tests run under it),
# npm (tokenizer packages) and pip (the JSON-Schema-Test-Suite and the Gemma GGUF), and the
# rustfmt/clippy components. Installs only what is missing; needs root or sudo only then.
#
#   scripts/setup.sh
set -euo pipefail

need=()
for pkg in build-essential cmake clang libclang-dev pkg-config ca-certificates valgrind; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v pip >/dev/null 2>&1 || dpkg -s python3-pip >/dev/null 2>&1 || need+=(python3-pip)
command -v npm >/dev/null 2>&1 || need+=(npm)
# The Python package's test venv (scripts/python-setup.sh).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup: need root (or sudo) to install: ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}" >&2
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

# Debian's python3-pip installs `pip3`, and `pip` only on newer releases: fetch-data.sh calls `pip`.
if ! command -v pip >/dev/null 2>&1; then
  if command -v pip3 >/dev/null 2>&1; then
    mkdir -p "$HOME/.local/bin"
    ln -sf "$(command -v pip3)" "$HOME/.local/bin/pip"
    echo "setup: linked pip -> pip3 in ~/.local/bin (put it on PATH)" >&2
  fi
fi

for component in rustfmt clippy; do
  probe=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
  if ! cargo "$probe" --version >/dev/null 2>&1; then
    command -v rustup >/dev/null 2>&1 || { echo "setup: cargo $probe missing and no rustup" >&2; exit 1; }
    rustup component add "$component"
  fi
done
