// generate: greedy text from GPT-2 compiled by mlpipe.
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"Generate text with GPT-2 compiled by mlpipe: greedy decoding, printed as it goes, then the\n"
               "time split into compiling and running. Each padded sequence length compiles once (and is\n"
               "kept on disk in ~/.cache/mlpipe)."};
  app.footer("Examples:\n"
             "  generate \"The meaning of life is\" --tokens 20\n"
             "  generate \"Hello\" --weights synthetic --config tiny --target cpu\n"
             "  generate \"Hello\" --weights gpt2/model.safetensors --mode fused   # config.json beside it");
  mlpipe::GenerateRequest request;
  mlpipe::ModelFlags flags;
  app.add_option("prompt", request.prompt, "Text to continue")->required();
  app.add_option("--tokens", request.tokens, "How many tokens to generate")->capture_default_str();
  mlpipe::addModelOptions(app, request, flags);
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("generate", [&] {
    mlpipe::applyModelFlags(request, flags);
    mlpipe::generate(request, std::cout);
  });
}
