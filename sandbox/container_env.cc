#include "sandbox/container_env.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace ptybox::sandbox {
namespace {

bool Exists(std::string_view root, std::string_view path) {
  std::string full(root);
  if (!full.empty() && full.back() == '/') full.pop_back();
  full += path;
  return ::access(full.c_str(), F_OK) == 0;
}

const ContainerEnv& Here() {
  static const ContainerEnv env = DetectContainer("/");
  return env;
}

}  // namespace

ContainerEnv DetectContainer(std::string_view root) {
  if (root == "/") {
    if (const char* k8s = std::getenv("KUBERNETES_SERVICE_HOST"); k8s != nullptr && *k8s) {
      return {ContainerEngine::kKubernetes, "KUBERNETES_SERVICE_HOST"};
    }
  }
  if (Exists(root, "/run/.containerenv")) {
    return {ContainerEngine::kPodman, "/run/.containerenv"};
  }
  if (Exists(root, "/.dockerenv")) return {ContainerEngine::kDocker, "/.dockerenv"};
  if (root == "/") {
    if (const char* name = std::getenv("container"); name != nullptr && *name) {
      const std::string_view value(name);
      return {value == "podman" ? ContainerEngine::kPodman : ContainerEngine::kOther,
              "container=" + std::string(value)};
    }
  }
  return {};
}

bool InContainer() { return Here().engine != ContainerEngine::kNone; }

std::string HostSysctlFix(std::string_view host_fix) {
  return InContainer() ? UserNamespaceFix() : std::string(host_fix);
}

std::string SeccompFix() {
  switch (Here().engine) {
    case ContainerEngine::kKubernetes:
      return "set the pod's securityContext.seccompProfile to {type: Unconfined} "
             "(images/kubernetes/, docs/deploy.md), or a Localhost profile that allows "
             "clone/unshare with namespace flags, setns, mount, umount2 and pivot_root";
    case ContainerEngine::kPodman:
      return "run the container with --security-opt seccomp=unconfined (Podman's default "
             "profile allows namespaces: a custom profile is in force), or with a profile that "
             "allows clone/unshare with namespace flags, setns, mount, umount2 and pivot_root";
    default:
      return "run the container with --security-opt seccomp=unconfined, or with a seccomp "
             "profile that allows clone/unshare with namespace flags, setns, mount, umount2 "
             "and pivot_root, or with --privileged";
  }
}

std::string ProcMaskFix() {
  switch (Here().engine) {
    case ContainerEngine::kKubernetes:
      return "set the container's securityContext.procMount: Unmasked (it needs a pod with "
             "hostUsers: false), or privileged: true";
    case ContainerEngine::kPodman:
      return "run the container with --security-opt unmask=/proc/* (or unmask=ALL)";
    case ContainerEngine::kDocker:
      return "run the container with --security-opt systempaths=unconfined (or --privileged)";
    default:
      return "run the container unmasked: Docker --security-opt systempaths=unconfined, Podman "
             "--security-opt unmask=/proc/*, Kubernetes procMount: Unmasked (or privileged)";
  }
}

std::string UserNamespaceFix() {
  switch (Here().engine) {
    case ContainerEngine::kNone:
      return "allow user namespaces: sysctl -w user.max_user_namespaces=15000; on Debian "
             "kernels sysctl -w kernel.unprivileged_userns_clone=1; on Ubuntu 23.10+ sysctl -w "
             "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile granting "
             "bwrap 'userns'";
    case ContainerEngine::kKubernetes:
      return "ptybox runs in a Kubernetes pod (" + Here().evidence +
             "): user namespaces are the node's setting, which cannot be changed from inside "
             "the pod; set "
             "seccompProfile: {type: Unconfined} and appArmorProfile: {type: Unconfined} in the "
             "securityContext, and on nodes that still refuse, ask the cluster's operator to "
             "allow unprivileged user namespaces (or use privileged: true)";
    default:
      return "ptybox runs in a container (" + Here().evidence +
             "): the host's kernel settings cannot be changed from inside it; run the "
             "container with --security-opt seccomp=unconfined --security-opt "
             "apparmor=unconfined (or --privileged), and if the host itself forbids "
             "unprivileged user namespaces (user.max_user_namespaces=0, Ubuntu's "
             "apparmor_restrict_unprivileged_userns=1), its operator must allow them";
  }
}

std::string PivotRootFix() {
  return "bubblewrap needs pivot_root: with EINVAL, / is not a mount point (a chroot or an "
         "initramfs root): run ptybox under a container runtime that pivots (Docker, Podman, "
         "runc) rather than chroot; with EPERM, a seccomp profile or security module refuses "
         "it: " +
         SeccompFix();
}

}  // namespace ptybox::sandbox
