// How the daemon shares its descriptor limit out (runtime/daemon.h, ShareDescriptors): the
// proxies' share never shrinks as the limit grows, the sessions' kept /proc descriptors never
// take the proxies' minimum nor more than half of what is left, and a limit too low for the
// asked connections and sessions lowers them (outside review 13 of the kept descriptors).
#include <gtest/gtest.h>

#include "backend/readiness/foreground_inspector.h"
#include "runtime/daemon.h"

namespace ptybox::testing {
namespace {

TEST(DescriptorSharesTest, TheProxiesShareNeverShrinksAsTheLimitGrows) {
  for (const size_t sessions : {size_t{16}, size_t{256}, size_t{1024}}) {
    SCOPED_TRACE("sessions " + std::to_string(sessions));
    size_t previous_proxy = 0;
    size_t previous_files = 0;
    for (size_t limit = 256; limit <= 65536; limit += 64) {
      const runtime::DescriptorShares s = runtime::ShareDescriptors(limit, 256, sessions);
      EXPECT_LE(s.proc_files, backend::kProcFilesPerSession * s.sessions) << "limit " << limit;
      if (!s.lowered) {
        // Among the limits that serve what was asked (below them a quarter goes to the proxies
        // while connections and sessions are lowered, a separate regime).
        ASSERT_GE(s.proxy_descriptors, previous_proxy) << "limit " << limit;
        previous_proxy = s.proxy_descriptors;
        EXPECT_EQ(s.connections, 256u);
        EXPECT_EQ(s.sessions, sessions);
        // What is left beside connections and sessions: at least half of it is the proxies'.
        EXPECT_GE(s.proxy_descriptors, s.proc_files) << "limit " << limit;
        EXPECT_GE(s.proxy_descriptors, size_t{128}) << "limit " << limit;
        EXPECT_GE(s.proc_files, previous_files) << "limit " << limit;
        previous_files = s.proc_files;
      } else {
        EXPECT_EQ(s.proc_files, 0u) << "no kept descriptors when the limits were lowered";
        EXPECT_LE(s.sessions, sessions);
        EXPECT_LE(s.connections, size_t{256});
      }
    }
    // A generous limit gives every session its kept descriptors.
    const runtime::DescriptorShares wide = runtime::ShareDescriptors(1 << 20, 256, sessions);
    EXPECT_FALSE(wide.lowered);
    EXPECT_EQ(wide.proc_files, backend::kProcFilesPerSession * sessions);
  }
}

TEST(DescriptorSharesTest, ALimitTooLowLowersTheConnectionsAndSessions) {
  const runtime::DescriptorShares s = runtime::ShareDescriptors(1024, 256, 1024);
  EXPECT_TRUE(s.lowered);
  EXPECT_LT(s.sessions, size_t{1024});
  EXPECT_GT(s.sessions, size_t{0});
  EXPECT_EQ(s.proc_files, 0u);
  EXPECT_GT(s.proxy_descriptors, size_t{0});
}

}  // namespace
}  // namespace ptybox::testing
