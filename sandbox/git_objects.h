// What a session hands the host's .git as objects is checked against the objects' names before
// the host keeps it (docs/security.md, "Git for agents"). Git trusts the name under which it finds
// an object and never rehashes on read: a loose object filed under the id of `hello\n` that held
// `EVIL!` was what a person's later `git checkout` of such a file wrote (the outside review's
// fifth finding). So a loose object is inflated and hashed here, and a pack is indexed by the
// host's own `git index-pack`, which computes every object's name from its contents; the index the
// session wrote is never used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/error.h"

namespace ptybox::sandbox {

// Largest object a loose object file may inflate to.
inline constexpr uint64_t kGitInflatedObjectMax = 4ull << 30;

// Whether the loose object read from `fd` (from offset 0, `size` bytes) is one zlib stream that
// inflates to `<type> <size>\0` (type blob, tree, commit or tag) and exactly that many bytes, with
// nothing after it, and whose SHA-1 (an `id` of 40 hex digits) or SHA-256 (64) is `id`. False
// with `why` naming the fault.
[[nodiscard]] bool LooseObjectMatchesName(int fd, uint64_t size, std::string_view id,
                                          std::string& why);

// A pack as the host's git indexed it.
struct IndexedPack {
  std::string name;  // the pack's name (hex), as git names its files: pack-<name>.pack
  std::string idx;   // the index git wrote (version 2), read into memory
};

// Runs the host's `git index-pack` on `pack` (a file only this process can write) with an empty
// environment and no configuration, outside any repository, and reads the index it wrote beside
// it. `hash_size` 20 (SHA-1) or 32 (SHA-256). An error says why git refused the pack (a thin pack,
// a corrupt one, no git on the host).
[[nodiscard]] Result<IndexedPack> IndexPack(const std::filesystem::path& pack, size_t hash_size);

}  // namespace ptybox::sandbox
