// The container image without Docker: images/build-rootfs.sh installs the build the way the
// Dockerfile does, and the installed tree must work from its own layout (ptybox in bin/,
// ptybox-init in libexec/ptybox/, no PTYBOX_INIT), with the image's operator policy.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/run/child_process.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = PTYBOX_SOURCE_DIR;
const fs::path kBuild = PTYBOX_BUILD_DIR;

// Runs a shell command line and returns its stdout (exit status in `status`).
std::string Capture(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int st = ::pclose(pipe);
  if (status != nullptr) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::set<std::string> ListedPackages() {
  std::set<std::string> packages;
  std::istringstream in(ReadFile(kSource / "images/runtime-packages.txt"));
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    while (words >> word) packages.insert(word);
  }
  return packages;
}

// Built once for the whole suite (the install is the expensive part).
class ImageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = new TempDir();
    int status = -1;
    build_log_ = Capture("'" + (kSource / "images/build-rootfs.sh").string() + "' --out '" +
                             (out_->path() / "image").string() + "' --build-dir '" +
                             kBuild.string() + "' 2>&1",
                         &status);
    build_status_ = status;
  }
  static void TearDownTestSuite() {
    delete out_;
    out_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(build_status_, 0) << build_log_; }

  static fs::path Image() { return out_->path() / "image"; }
  static fs::path Root() { return Image() / "rootfs"; }
  static fs::path Ptybox() { return Root() / "usr/bin/ptybox"; }

  // The installed binary with an environment that names no helper path: it must find
  // ptybox-init from its own location.
  std::unique_ptr<ChildProcess> Start(std::vector<std::string> args, const fs::path& cwd,
                                      const fs::path& stderr_file = {}) {
    ChildProcess::Options o;
    o.argv = {Ptybox().string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8",
             "PTYBOX_OPERATOR_POLICY=" + (Image() / "no-default-policy.yaml").string()};
    o.cwd = cwd;
    o.stderr_file = stderr_file;
    return std::make_unique<ChildProcess>(std::move(o));
  }

  static TempDir* out_;
  static std::string build_log_;
  static int build_status_;
};

TempDir* ImageTest::out_ = nullptr;
std::string ImageTest::build_log_;
int ImageTest::build_status_ = -1;

TEST_F(ImageTest, LayoutMatchesWhatPtyboxLooksFor) {
  EXPECT_EQ(::access(Ptybox().c_str(), X_OK), 0);
  EXPECT_EQ(::access((Root() / "usr/libexec/ptybox/ptybox-init").c_str(), X_OK), 0);
  struct stat st {};
  ASSERT_EQ(::stat((Root() / "etc/ptybox/policy.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "the operator policy is readable by everyone";
  ASSERT_EQ(::stat((Root() / "run/ptybox").c_str(), &st), 0);
  // Sticky and writable by all, as /tmp: the daemon creates its 0600 socket here whatever
  // --user the container runs as (the socket, not the directory, keeps other users out).
  EXPECT_EQ(st.st_mode & 07777, 01777u) << "any container user can create its socket here";
  EXPECT_TRUE(fs::is_directory(Root() / "workspace"));
  EXPECT_EQ(ReadFile(Root() / "etc/ptybox/policy.yaml"), ReadFile(kSource / "images/policy.yaml"));
}

TEST_F(ImageTest, PackageListNamesEveryLibraryTheBinariesLink) {
  std::set<std::string> listed = ListedPackages();
  std::string written = ReadFile(Image() / "packages.txt");
  std::set<std::string> in_output;
  std::istringstream words(written);
  for (std::string w; words >> w;) in_output.insert(w);
  EXPECT_EQ(in_output, listed);
  EXPECT_TRUE(listed.contains("bubblewrap"));
  if (::access("/usr/bin/ldd", X_OK) != 0 || ::access("/usr/bin/dpkg-query", X_OK) != 0) {
    GTEST_SKIP() << "ldd or dpkg is missing: cannot map libraries to Debian packages here";
  }
  for (const char* binary : {"usr/bin/ptybox", "usr/libexec/ptybox/ptybox-init"}) {
    std::string libs =
        Capture("ldd '" + (Root() / binary).string() + "' | awk '/=> \\//{print $3}'");
    std::istringstream lines(libs);
    for (std::string lib; std::getline(lines, lib);) {
      // dpkg knows a library by the path its package installed (merged /usr: try both).
      std::string canonical = fs::canonical(lib).string();
      std::string owner = Capture("dpkg-query -S '" + lib + "' '" + canonical +
                                  "' 2>/dev/null | head -n1 | cut -d: -f1");
      while (!owner.empty() && owner.back() == '\n') owner.pop_back();
      ASSERT_FALSE(owner.empty()) << lib << " (of " << binary << ") belongs to no package";
      // A sanitized build links the sanitizer runtimes; the image carries the Release build.
      if (owner.starts_with("libasan") || owner.starts_with("libubsan")) continue;
      EXPECT_TRUE(listed.contains(owner)) << binary << " links " << lib << " from " << owner
                                          << ", which images/runtime-packages.txt does not list";
    }
  }
}

TEST_F(ImageTest, DockerfileAgreesWithTheRootfsConfig) {
  Json config = Json::parse(ReadFile(Image() / "config.json"));
  std::string dockerfile = ReadFile(kSource / "images/Dockerfile");
  auto expect_line = [&](const std::string& line) {
    EXPECT_NE(dockerfile.find("\n" + line + "\n"), std::string::npos)
        << "images/Dockerfile lacks: " << line;
  };
  auto exec_form = [](const Json& list) {
    std::string s = "[";
    for (size_t i = 0; i < list.size(); ++i)
      s += (i ? ", \"" : "\"") + list[i].get<std::string>() + "\"";
    return s + "]";
  };
  expect_line("ENTRYPOINT " + exec_form(config["Entrypoint"]));
  expect_line("CMD " + exec_form(config["Cmd"]));
  expect_line("USER " + config["User"].get<std::string>());
  expect_line("WORKDIR " + config["WorkingDir"].get<std::string>());
  expect_line("STOPSIGNAL " + config["StopSignal"].get<std::string>());
  expect_line("ENV " + config["Env"][0].get<std::string>());
  Json health = config["Healthcheck"]["Test"];
  EXPECT_NE(dockerfile.find("CMD " +
                            exec_form(Json(std::vector<Json>(health.begin() + 1, health.end())))),
            std::string::npos);
  EXPECT_NE(dockerfile.find("COPY images/policy.yaml /etc/ptybox/policy.yaml"), std::string::npos);
  // The image installs the Debian package (prefix /usr), as build-rootfs.sh lays it out.
  EXPECT_NE(dockerfile.find("/tmp/deb/ptybox_*_amd64.deb"), std::string::npos);
  EXPECT_NE(dockerfile.find("images/runtime-packages.txt"), std::string::npos);
}

TEST_F(ImageTest, InstalledDoctorFindsItsHelperAndTheHostCanSandbox) {
  TempDir cwd;
  auto doctor = Start({"doctor"}, cwd.path());
  doctor->CloseStdin();
  ChildProcess::Exit e = doctor->Wait();
  EXPECT_EQ(e.code, 0) << doctor->out() << doctor->err();
  EXPECT_NE(doctor->out().find("[ ok ] ptybox-init: " +
                               (Root() / "usr/libexec/ptybox/ptybox-init").string()),
            std::string::npos)
      << doctor->out();
  EXPECT_NE(doctor->out().find("this host can run confined sessions"), std::string::npos);
}

TEST_F(ImageTest, InstalledRunUsesTheImagePolicy) {
  TempDir ws;
  const std::string policy = (Root() / "etc/ptybox/policy.yaml").string();
  auto check = Start({"policy", "check", policy}, ws.path());
  check->CloseStdin();
  EXPECT_EQ(check->Wait().code, 0) << check->out() << check->err();

  auto run = Start({"run", "--policy", policy, "--", "sh", "-c",
                    "echo \"CI=$CI\"; touch made; touch /etc/x 2>/dev/null || echo etc-refused"},
                   ws.path());
  run->CloseStdin();
  ChildProcess::Exit e = run->Wait();
  EXPECT_EQ(e.code, 0) << run->err();
  EXPECT_EQ(run->out(), "CI=true\netc-refused\n");
  EXPECT_TRUE(fs::exists(ws.path() / "made"));

  // The image's ceiling keeps danger-full-access out of reach.
  run = Start({"run", "--policy", policy, "--mode", "danger-full-access", "--", "true"}, ws.path());
  run->CloseStdin();
  EXPECT_EQ(run->Wait().code, 125) << run->err();
}

TEST_F(ImageTest, InstalledDaemonServesASessionAndStopsOnSigterm) {
  TempDir ws;
  TempDir state;
  const fs::path socket = state.path() / "ptybox.sock";
  auto daemon = Start({"serve", "--socket", socket.string(), "--policy",
                       (Root() / "etc/ptybox/policy.yaml").string()},
                      ws.path(), state.path() / "daemon.log");
  daemon->CloseStdin();
  RpcClient client(socket);
  std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << ReadFile(state.path() / "daemon.log");
  Json r = Send(client, id, "pwd; echo $CI\n");
  EXPECT_EQ(r["viewport"], ws.path().string() + "\ntrue") << r.dump();
  EXPECT_EQ(r["waitReason"], "stdin_read");
  daemon->Signal(SIGTERM);
  ChildProcess::Exit e = daemon->Wait();
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 0) << ReadFile(state.path() / "daemon.log");
}

// What `ptybox doctor` prints in a container whose seccomp profile refuses namespaces (as
// Docker's default does): ptybox's own confined sandbox is such a place.
TEST_F(ImageTest, DoctorUnderASeccompFilterThatRefusesNamespacesSaysWhichFlag) {
#if defined(__SANITIZE_ADDRESS__)
  // The engine's filter this test imitates refuses ptrace too, which LeakSanitizer needs when
  // the sanitized ptybox exits (its exit status would be LSan's); the image carries Release.
  GTEST_SKIP() << "sanitized build: LeakSanitizer cannot run under the imitated engine filter";
#endif
  TempDir ws;
  // The sandbox sees the workspace but not a build tree under the host's /tmp (a checkout may
  // live there): copy the two binaries into the workspace, where the inner ptybox finds
  // ptybox-init beside itself.
  const fs::path inner_bin = ws.path() / "bin";
  fs::create_directories(inner_bin);
  fs::copy_file(PtyboxBinary(), inner_bin / "ptybox");
  fs::copy_file(InitBinary(), inner_bin / "ptybox-init");
  const std::string inner = (inner_bin / "ptybox").string();
  ChildProcess::Options o;
  o.argv = {PtyboxBinary().string(), "run", "--mode", "workspace-write", "--", inner, "doctor"};
  o.env = TestEnvironment(ws.path() / "no-operator-policy.yaml");
  o.cwd = ws.path();
  ChildProcess run(std::move(o));
  run.CloseStdin();
  ChildProcess::Exit e = run.Wait();
  EXPECT_EQ(e.code, 1) << "doctor's own exit code passes through: " << run.out() << run.err();
  EXPECT_NE(run.out().find("[FAIL] seccomp:"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("--security-opt seccomp=unconfined"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("this host cannot sandbox"), std::string::npos) << run.out();

  // And a nested `ptybox run` there refuses to run the command unconfined.
  o.argv = {PtyboxBinary().string(),
            "run",
            "--mode",
            "workspace-write",
            "--",
            inner,
            "run",
            "--mode",
            "workspace-write",
            "--",
            "sh",
            "-c",
            "echo ran"};
  o.env = TestEnvironment(ws.path() / "no-operator-policy.yaml");
  o.cwd = ws.path();
  ChildProcess nested(std::move(o));
  nested.CloseStdin();
  e = nested.Wait();
  EXPECT_EQ(e.code, 125) << nested.err();
  EXPECT_EQ(nested.out(), "");
  EXPECT_NE(nested.err().find("seccomp"), std::string::npos) << nested.err();
}

}  // namespace
}  // namespace ptybox::testing
