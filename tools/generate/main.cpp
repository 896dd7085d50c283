// generate: greedy text from GPT-2 compiled by mlpipe.
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"Generate text with GPT-2 compiled by mlpipe: greedy decoding, printed as it goes, then the\n"
               "time split into compiling, prefilling the prompt and decoding (tokens per second). The prompt\n"
               "runs once and fills a KV cache; each new token is one decode step against it. Each program\n"
               "compiles once (and is kept on disk in ~/.cache/mlpipe)."};
  app.footer("Examples:\n"
             "  generate \"The meaning of life is\" --tokens 20\n"
             "  generate \"Hello\" --weights synthetic --config tiny --target cpu\n"
             "  generate \"Hello\" --weights gpt2/model.safetensors --mode fused   # config.json beside it\n"
             "  generate \"Hello\" --tokens 20 --no-cache          # recompute the whole sequence every step");
  mlpipe::GenerateRequest request;
  mlpipe::ModelFlags flags;
  app.add_option("prompt", request.prompt, "Text to continue")->required();
  app.add_option("--tokens", request.tokens, "How many tokens to generate")->capture_default_str();
  bool noCache = false;
  app.add_flag("--no-cache", noCache,
               "Run every step as a forward over the whole sequence instead of prefilling a KV cache and "
               "decoding one token at a time");
  mlpipe::addModelOptions(app, request, flags);
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("generate", [&] {
    mlpipe::applyModelFlags(request, flags);
    request.kvCache = !noCache;
    mlpipe::generate(request, std::cout);
  });
}
