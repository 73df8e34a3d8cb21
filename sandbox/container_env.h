// Is ptybox itself inside a container, and under which engine? `ptybox doctor` and
// sandbox_unavailable name the flag of that engine (Docker, Podman, Kubernetes) instead of a
// host sysctl, which cannot be changed from inside a container.
#pragma once

#include <string>
#include <string_view>

namespace ptybox::sandbox {

enum class ContainerEngine { kNone, kDocker, kPodman, kKubernetes, kOther };

struct ContainerEnv {
  ContainerEngine engine = ContainerEngine::kNone;
  std::string evidence;  // what showed it: "/.dockerenv", "/run/.containerenv", ...
};

// Reads the markers each engine leaves: KUBERNETES_SERVICE_HOST in the environment (every pod),
// /run/.containerenv (Podman, CRI-O), /.dockerenv (Docker), $container (Podman, LXC, nspawn).
// `root` is "/" except in tests.
ContainerEnv DetectContainer(std::string_view root = "/");

// True when DetectContainer("/") finds an engine (cached).
bool InContainer();
// `host_fix` (a sysctl to set on this machine) outside a container; inside one, where the
// sysctl belongs to the host, UserNamespaceFix().
std::string HostSysctlFix(std::string_view host_fix);

// The fixes, worded for where ptybox runs (the engine DetectContainer("/") finds, cached).
// A seccomp profile refuses clone/unshare with namespace flags.
std::string SeccompFix();
// Masked /proc paths forbid mounting a new /proc.
std::string ProcMaskFix();
// User namespaces are refused, not by seccomp: the host's sysctls or an LSM. Inside a container
// these belong to the host: the text says so instead of suggesting a sysctl.
std::string UserNamespaceFix();
// pivot_root was refused (EPERM: a seccomp profile or LSM) or impossible (EINVAL: / is not a
// mount point, as under chroot or an initramfs).
std::string PivotRootFix();

}  // namespace ptybox::sandbox
