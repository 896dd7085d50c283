// generate: greedy text from GPT-2 compiled by mlpipe.
#include "driver/cli_checks.h"
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"Generate text with GPT-2 compiled by mlpipe: greedy decoding, printed as it goes, then the\n"
               "time split into compiling, prefilling the prompt and decoding (tokens per second). The prompt\n"
               "runs once and fills a KV cache; each new token is one decode step against it, the steps chained\n"
               "on the target (each step's greedy token the next one's, printed a few steps at a time). Each program\n"
               "compiles once (and is kept on disk in ~/.cache/mlpipe). With --prompts, every line of a file\n"
               "is a prompt and they are decoded together: each prompt is prefilled alone into a KV cache slot\n"
               "of its own, then one decode step per token serves the whole batch, each sequence at its own\n"
               "position; each sequence's text (the same as generating it alone) is printed in the file's\n"
               "order, each followed by an empty line."};
  app.footer("Examples:\n"
             "  generate \"The meaning of life is\" --tokens 20\n"
             "  generate \"Hello\" --weights synthetic --config tiny --target cpu\n"
             "  generate \"Hello\" --weights gpt2/model.safetensors --mode fused   # config.json beside it\n"
             "  generate \"Hello\" --tokens 20 --no-cache          # recompute the whole sequence every step\n"
             "  printf 'Hello\\nThe meaning of life is\\n' | generate --prompts - --config tiny --target cpu\n"
             "  generate --prompts prompts.txt --batch 2 --config tiny --target cpu   # 2 sequences at a time");
  mlpipe::GenerateRequest request;
  mlpipe::ModelFlags flags;
  app.add_option("prompt", request.prompt, "Text to continue (or give --prompts)");
  app.add_option("--prompts", request.promptsFile,
                 "A file of prompts, one a line (- for stdin; no empty lines), decoded together");
  app.add_option("--batch", request.batch,
                 fmt::format("With --prompts: how many sequences decode at once (default: all of them, at most {})",
                             mlpipe::kDefaultBatch))
      ->check(mlpipe::kPositive);
  app.add_option("--tokens", request.tokens, "How many tokens to generate")->capture_default_str();
  bool noCache = false;
  app.add_flag("--no-cache", noCache,
               "Run every step as a forward over the whole sequence instead of prefilling a KV cache and "
               "decoding one token at a time");
  mlpipe::addModelOptions(app, request, flags);
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("generate", [&] {
    bool batched = app.count("--prompts") > 0;
    if (batched && app.count("prompt") > 0)
      mlpipe::fail("give a prompt or --prompts FILE, not both");
    if (!batched && app.count("prompt") == 0)
      mlpipe::fail("give a prompt to continue, or --prompts FILE");
    if (!batched && app.count("--batch") > 0)
      mlpipe::fail("--batch applies to --prompts");
    mlpipe::applyModelFlags(request, flags);
    request.kvCache = !noCache;
    if (batched)
      mlpipe::generateBatched(request, std::cout);
    else
      mlpipe::generate(request, std::cout);
  });
}
