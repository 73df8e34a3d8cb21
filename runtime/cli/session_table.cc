#include "runtime/cli/session_table.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/untrusted_text.h"

namespace ptybox::runtime {
namespace {

std::string Field(const Json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return "?";
  std::string text = Printable(object[key].get<std::string>());
  return text.empty() ? "-" : text;
}

}  // namespace

std::string StatusText(const Json& status) {
  if (!status.is_object() || status.value("kind", "") != "exited") return "running";
  if (status.contains("signal") && status["signal"].is_string()) {
    return "killed by " + Printable(status["signal"].get<std::string>());
  }
  if (status.contains("exitCode") && status["exitCode"].is_number_integer()) {
    return "exited " + std::to_string(status["exitCode"].get<int64_t>());
  }
  return "exited";
}

std::string SessionTable(const Json& sessions) {
  if (!sessions.is_array() || sessions.empty()) return "no sessions\n";
  using Row = std::array<std::string, 5>;
  std::vector<Row> rows{{"SESSION", "NAME", "MODE", "BUSY", "STATUS"}};
  for (const Json& session : sessions) {
    const bool busy = session.is_object() && session.value("busy", false);
    rows.push_back(
        {Field(session, "sessionId"), Field(session, "name"), Field(session, "mode"),
         busy ? "yes" : "no",
         StatusText(session.is_object() ? session.value("sessionStatus", Json()) : Json())});
  }
  std::array<size_t, 5> width{};
  for (const Row& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace ptybox::runtime
