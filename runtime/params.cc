#include "runtime/params.h"

#include <algorithm>

#include "common/join.h"
#include "common/propagate.h"

namespace ptybox::runtime {

Result<Params> Params::Check(const Json& params, const std::string& method,
                             std::vector<std::string> allowed) {
  if (params.is_null()) return Params(Json::object(), method);
  if (!params.is_object()) {
    return Fail(ErrorKind::kInvalidParams, method + ": params must be an object", "params");
  }
  for (const auto& [key, value] : params.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      const std::string list = Join(allowed);
      return Fail(ErrorKind::kInvalidParams,
                  method + ": unknown parameter \"" + Abbreviate(key) +
                      "\" (accepted: " + (list.empty() ? std::string("none") : list) + ")",
                  Abbreviate(key));
    }
  }
  return Params(params, method);
}

namespace {

Result<void> CheckLength(const std::string& method, const std::string& key, const Json& value,
                         size_t max_bytes) {
  const size_t size = value.get_ref<const std::string&>().size();
  if (size <= max_bytes) return {};
  return Fail(ErrorKind::kInvalidParams,
              method + ": \"" + key + "\" is " + std::to_string(size) + " bytes; the maximum is " +
                  std::to_string(max_bytes) + " bytes",
              key);
}

}  // namespace

Result<std::string> Params::RequiredString(const std::string& key, size_t max_bytes) const {
  auto it = params_.find(key);
  if (it == params_.end() || !it->is_string()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" (a string) is required",
                key);
  }
  if (Result<void> ok = CheckLength(method_, key, *it, max_bytes); !ok) {
    return Propagate(ok);
  }
  return it->get<std::string>();
}

Result<std::optional<std::string>> Params::OptionalString(const std::string& key,
                                                          size_t max_bytes) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be a string", key);
  }
  if (Result<void> ok = CheckLength(method_, key, *it, max_bytes); !ok) {
    return Propagate(ok);
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> Params::OptionalInt(const std::string& key, int64_t min,
                                                   int64_t max) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be an integer", key);
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be at most " + std::to_string(max), key);
  }
  int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be between " + std::to_string(min) + " and " +
                    std::to_string(max),
                key);
  }
  return std::optional<int64_t>(v);
}

Result<std::optional<bool>> Params::OptionalBool(const std::string& key) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be true or false",
                key);
  }
  return std::optional<bool>(it->get<bool>());
}

Result<std::map<std::string, std::string>> Params::StringMap(const std::string& key) const {
  std::map<std::string, std::string> out;
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be an object of strings", key);
  }
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string()) {
      return Fail(ErrorKind::kInvalidParams,
                  method_ + ": \"" + key + "." + name + "\" must be a string", key + "." + name);
    }
    out[name] = value.get<std::string>();
  }
  return out;
}

}  // namespace ptybox::runtime
