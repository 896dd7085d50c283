# Writes OUTPUT: a C++ source defining mlpipe::embeddedPipeline(name) over
# the .pipeline files in SOURCE_DIR (their text verbatim, comments included).
file(GLOB inputs ${SOURCE_DIR}/*.pipeline)
set(body "")
foreach(file ${inputs})
  get_filename_component(name ${file} NAME_WE)
  file(READ ${file} text)
  string(APPEND body "    {\"${name}\", R\"mlpipe_pipeline(${text})mlpipe_pipeline\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from pipelines/*.pipeline by cmake/EmbedPipelines.cmake.
#include <map>
#include <string>

namespace mlpipe {
const std::map<std::string, std::string> &embeddedPipelines() {
  static const std::map<std::string, std::string> pipelines = {
${body}  };
  return pipelines;
}
} // namespace mlpipe
")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
