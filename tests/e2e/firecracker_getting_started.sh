#!/usr/bin/env bash
# Firecracker's getting-started guide (firecracker docs/getting-started.md, "Starting
# Firecracker", the second terminal's commands), as written there, for the e2e test
# FirecrackerGuide.TheGuidesCurlCallsBootTheExt4RootFileSystemToAShell
# (tests/e2e/firecracker_guide_test.cpp), which runs it against `dsec-vmm serve --api-sock`
# started in this directory. What differs from the guide:
# - the kernel (./vmlinux: the default kernel) and root file system (./rootfs.ext4:
#   images/build-rootfs-ext4's) are ours, and the API socket and TAP may be named by the
#   caller (in the test bed /tmp cannot hold a Unix socket);
# - `sudo` runs its command directly where there is none (the test bed runs as root);
# - the guide's machine-config call (its earlier versions' "2 vCPUs and 1024 MiB") is in;
# - left out: ip forwarding and iptables (the host's own network), and ssh into the guest
#   (the test uses the console).
# The guide's lines are kept as written, unquoted ${ARCH} and `ls` included.
# shellcheck disable=SC2012,SC2086
set -eu
command -v sudo >/dev/null || sudo() { "$@"; }

TAP_DEV="${TAP_DEV:-tap0}"
TAP_IP="172.16.0.1"
MASK_SHORT="/30"

# Setup network interface
sudo ip link del "$TAP_DEV" 2> /dev/null || true
sudo ip tuntap add dev "$TAP_DEV" mode tap
sudo ip addr add "${TAP_IP}${MASK_SHORT}" dev "$TAP_DEV"
sudo ip link set dev "$TAP_DEV" up

API_SOCKET="${API_SOCKET:-/tmp/firecracker.socket}"
LOGFILE="./firecracker.log"

# Create log file
touch $LOGFILE

# Set log file
sudo curl -X PUT --unix-socket "${API_SOCKET}" \
    --data "{
        \"log_path\": \"${LOGFILE}\",
        \"level\": \"Debug\",
        \"show_level\": true,
        \"show_log_origin\": true
    }" \
    "http://localhost/logger"

KERNEL="./$(ls vmlinux* | tail -1)"
KERNEL_BOOT_ARGS="console=ttyS0 reboot=k panic=1 pci=off"

ARCH=$(uname -m)

if [ ${ARCH} = "aarch64" ]; then
    KERNEL_BOOT_ARGS="keep_bootcon ${KERNEL_BOOT_ARGS}"
fi

# Set boot source
sudo curl -X PUT --unix-socket "${API_SOCKET}" \
    --data "{
        \"kernel_image_path\": \"${KERNEL}\",
        \"boot_args\": \"${KERNEL_BOOT_ARGS}\"
    }" \
    "http://localhost/boot-source"

ROOTFS="./rootfs.ext4"

# Set rootfs
sudo curl -X PUT --unix-socket "${API_SOCKET}" \
    --data "{
        \"drive_id\": \"rootfs\",
        \"path_on_host\": \"${ROOTFS}\",
        \"is_root_device\": true,
        \"is_read_only\": false
    }" \
    "http://localhost/drives/rootfs"

# 2 vCPUs and 1024 MiB (the guide's earlier versions)
sudo curl --unix-socket "${API_SOCKET}" -i  \
    -X PUT 'http://localhost/machine-config' \
    -H 'Accept: application/json'            \
    -H 'Content-Type: application/json'      \
    -d '{
        "vcpu_count": 2,
        "mem_size_mib": 1024
    }'

# The IP address of a guest is derived from its MAC address with
# `fcnet-setup.sh`, this has been pre-configured in the guest rootfs. It is
# important that `TAP_IP` and `FC_MAC` match this.
FC_MAC="06:00:AC:10:00:02"

# Set network interface
sudo curl -X PUT --unix-socket "${API_SOCKET}" \
    --data "{
        \"iface_id\": \"net1\",
        \"guest_mac\": \"$FC_MAC\",
        \"host_dev_name\": \"$TAP_DEV\"
    }" \
    "http://localhost/network-interfaces/net1"

# API requests are handled asynchronously, it is important the configuration is
# set, before `InstanceStart`.
sleep 0.015s

# Start microVM
sudo curl -X PUT --unix-socket "${API_SOCKET}" \
    --data "{
        \"action_type\": \"InstanceStart\"
    }" \
    "http://localhost/actions"
