// The one check of a reply's error kind: `EXPECT_ERROR_KIND(reply, ErrorKind::kBusy)` instead of
// comparing error.data.kind to a string literal written again in every suite. The names come from
// the one kind table (common/error.h, `ToString(ErrorKind)`), so a test cannot misspell one.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"

namespace ptybox::testing {

// The contract's name of `kind` ("not_found", "busy", ...), for records that carry a kind
// outside a JSON-RPC reply (the audit log's "error": {"kind": ...}).
inline std::string KindName(ErrorKind kind) { return std::string(ToString(kind)); }

// Whether `reply` is a JSON-RPC error whose error.data.kind is `kind`; the failure message names
// the kind it has instead and the whole reply.
inline ::testing::AssertionResult IsErrorKind(const nlohmann::json& reply, ErrorKind kind) {
  const std::string want = KindName(kind);
  if (!reply.is_object() || !reply.contains("error")) {
    return ::testing::AssertionFailure()
           << "expected error kind " << want << ", got no error: " << reply.dump();
  }
  const nlohmann::json& error = reply["error"];
  const nlohmann::json* got = nullptr;
  if (error.is_object() && error.contains("data") && error["data"].is_object() &&
      error["data"].contains("kind")) {
    got = &error["data"]["kind"];
  }
  if (got != nullptr && got->is_string() && got->get<std::string>() == want) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "expected error kind " << want << ", got "
         << (got != nullptr ? got->dump() : std::string("none")) << ": " << reply.dump();
}

}  // namespace ptybox::testing

// EXPECT_/ASSERT_ a reply's error kind; further context streams after them as after EXPECT_TRUE.
#define EXPECT_ERROR_KIND(reply, kind) EXPECT_TRUE(::ptybox::testing::IsErrorKind((reply), (kind)))
#define ASSERT_ERROR_KIND(reply, kind) ASSERT_TRUE(::ptybox::testing::IsErrorKind((reply), (kind)))
