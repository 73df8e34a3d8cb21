// Test support for tests/audit: reading an audit log or a recording back (every line must
// parse; a line that does not fails the test), and waiting for a background send.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {

// Every line of an audit log as JSON. Fails the test for a line that does not parse, or for
// a line longer than `max_line_bytes`.
std::vector<Json> ReadAuditLog(const std::filesystem::path& path,
                               size_t max_line_bytes = 64 * 1024);
// The records of `event`, in order.
std::vector<Json> EventsNamed(const std::vector<Json>& records, const std::string& event);
// The "event" field of every record, in order.
std::vector<std::string> EventNames(const std::vector<Json>& records);
// The file's permission bits.
unsigned FileMode(const std::filesystem::path& path);
// Polls terminal_output until the session's last send is done (hang guard only).
Json WaitBackgroundDone(RpcClient& client, const std::string& session);
// Runs a shell command line; its exit status.
int Shell(const std::string& command);

}  // namespace ptybox::testing
