// Reading a contract method's params, for both protocol servers, with messages that name the
// parameter. Each method's result JSON lives with its entry in runtime/methods.cc; the JSON-RPC
// envelope is runtime/rpc/json_rpc.h.
#pragma once

#include <expected>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

// Bounds of strings in params (bytes). `input` is bounded by the line (16 MiB) only.
inline constexpr size_t kMaxParamStringBytes = 4096;  // default: ids, modes, signals, cwd
inline constexpr size_t kMaxNameBytes = 256;          // terminal_open `name`
inline constexpr size_t kUnboundedString = static_cast<size_t>(-1);

// Reading params: each failure is kInvalidParams naming the parameter.
class Params final {
 public:
  // `allowed` lists every parameter the method accepts; any other key is an error.
  static Result<Params> Check(const Json& params, const std::string& method,
                              std::vector<std::string> allowed);
  // Strings longer than `max_bytes` are refused with a message naming the bound.
  Result<std::string> RequiredString(const std::string& key,
                                     size_t max_bytes = kMaxParamStringBytes) const;
  Result<std::optional<std::string>> OptionalString(const std::string& key,
                                                    size_t max_bytes = kMaxParamStringBytes) const;
  Result<std::optional<int64_t>> OptionalInt(const std::string& key, int64_t min,
                                             int64_t max) const;
  Result<std::optional<bool>> OptionalBool(const std::string& key) const;
  Result<std::map<std::string, std::string>> StringMap(const std::string& key) const;
  [[nodiscard]] const Json& raw() const { return params_; }

 private:
  explicit Params(Json params, std::string method)
      : params_(std::move(params)), method_(std::move(method)) {}
  Json params_;
  std::string method_;
};

}  // namespace ptybox::runtime
