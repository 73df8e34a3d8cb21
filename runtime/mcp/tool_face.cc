#include "runtime/mcp/tool_face.h"

namespace ptybox::runtime {

Json Annotations(const ToolHints& hints) {
  Json out{{"readOnlyHint", hints.read_only}};
  if (!hints.read_only && !hints.destructive) out["destructiveHint"] = false;
  if (!hints.read_only && hints.idempotent) out["idempotentHint"] = true;
  if (!hints.open_world) out["openWorldHint"] = false;
  return out;
}

}  // namespace ptybox::runtime
