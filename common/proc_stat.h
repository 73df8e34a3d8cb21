// The one parser of /proc/<pid>/stat, shared by the daemon (foreground inspection, signals,
// session cleanup) and ptybox-init (which links only sandbox/ and common/), plus the small
// process-table walks built on it: read one process, list every process, a tree's members.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>
#include <vector>

namespace ptybox::proc {

// The fields of /proc/<pid>/stat (or task/<tid>/stat) we use. The comm field is skipped by
// its last ')', so a name holding spaces, parentheses or newlines cannot shift the fields.
struct StatFields {
  pid_t pid = 0;
  char state = '?';      // field 3
  pid_t ppid = 0;        // field 4
  pid_t pgrp = 0;        // field 5
  pid_t session = 0;     // field 6
  int tty_nr = 0;        // field 7: the controlling terminal's device number, 0 for none
  long num_threads = 0;  // field 20
  // field 38: the signal the parent gets at its end; 0 for a child started with none (the
  // daemon's own helper processes, sandbox/captured_run.h), -1 when the line stops before it.
  int exit_signal = -1;
};
[[nodiscard]] std::optional<StatFields> ParseStat(std::string_view text);

// Reads and parses /proc/<pid>/stat; nullopt when the process is gone or the text is malformed.
[[nodiscard]] std::optional<StatFields> ReadStat(pid_t pid);

// Every process visible in /proc right now (those that vanish while we look are skipped).
[[nodiscard]] std::vector<StatFields> ReadAllStats();

// The descendants of `root` (by parent links in `table`), breadth-first, `root` excluded.
[[nodiscard]] std::vector<pid_t> Descendants(const std::vector<StatFields>& table, pid_t root);

// True for a zombie or a dead task: it runs no code, only its parent's wait is missing.
[[nodiscard]] inline bool IsDead(const StatFields& f) { return f.state == 'Z' || f.state == 'X'; }

}  // namespace ptybox::proc
