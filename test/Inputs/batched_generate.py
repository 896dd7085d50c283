#!/usr/bin/env python3
"""Checks generate --prompts against generate run on each prompt alone.

  batched_generate.py --scratch DIR --prompts N --batch B --tokens T -- GENERATE_FLAGS...

Writes N fresh random prompts of different lengths (the first a single
token, the rest 1 to 12 words) to DIR/prompts.txt, runs `generate --prompts
DIR/prompts.txt --batch B --tokens T GENERATE_FLAGS` once and `generate
PROMPT --tokens T GENERATE_FLAGS` per prompt, and requires that the batched
run prints each sequence's text exactly as the run alone does, in the file's
order, each followed by an empty line, before its report. Prints the report's
lines and "PASS", or what differs and exits 1.
"""
import argparse
import os
import random
import subprocess
import sys

# Prompts of one GPT-2 token.
ONE_TOKEN = ["Hello", "The", "When", "In"]
# Words of a few GPT-2 tokens at most.
WORDS = ["Hello", "The", "time", "water", "people", "world", "house", "music", "light", "city", "small", "long",
         "river", "green", "about", "never", "after", "number", "table", "window"]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--prompts", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("flags", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    flags = [flag for flag in args.flags if flag != "--"]
    os.makedirs(args.scratch, exist_ok=True)
    prompts = [random.choice(ONE_TOKEN)]
    while len(prompts) < args.prompts:
        prompts.append(" ".join(random.choice(WORDS) for _ in range(random.randint(1, 12))))
    random.shuffle(prompts)
    path = os.path.join(args.scratch, "prompts.txt")
    with open(path, "w") as file:
        file.write("".join(prompt + "\n" for prompt in prompts))

    batched = run(["generate", "--prompts", path, "--batch", str(args.batch), "--tokens", str(args.tokens)] + flags)
    expected = ""
    for prompt in prompts:
        alone = run(["generate", prompt, "--tokens", str(args.tokens)] + flags)
        report = alone.index(f"\n\n{args.tokens} tokens, ")
        expected += alone[:report] + "\n\n"
    texts, report = batched[:len(expected)], batched[len(expected):]
    if texts != expected or not report.startswith(f"{len(prompts)} prompts, "):
        print("FAIL: the batched texts differ from each prompt's alone")
        print("prompts:\n" + "".join(f"  {prompt!r}\n" for prompt in prompts))
        print("alone:\n" + expected)
        print("batched:\n" + batched)
        sys.exit(1)
    print(report, end="")
    print(f"PASS: {len(prompts)} prompts of {sorted(len(p.split()) for p in prompts)} words")


if __name__ == "__main__":
    main()
