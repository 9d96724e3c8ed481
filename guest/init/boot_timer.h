// The guest's half of the boot timer, shared by dsec-init and the VMM.
//
// When guest userspace is up, dsec-init writes DSEC_BOOT_TIMER_VALUE (one byte) to
// I/O port DSEC_BOOT_TIMER_PORT. The VMM records the time of the first such write as
// "boot complete", measured from the VM's start. Port I/O needs no device in the
// guest kernel and no MMIO slot, and it traps to the VMM as a KVM_EXIT_IO. Only PID 1
// (CAP_SYS_RAWIO, after ioperm) writes it. Nothing is read back: a read returns
// whatever the VMM's default for unclaimed ports is. See docs/boot-timer.md.
#ifndef DSEC_GUEST_INIT_BOOT_TIMER_H
#define DSEC_GUEST_INIT_BOOT_TIMER_H

// Unused on PCs and by QEMU's microvm and pc machines, so the write goes nowhere
// harmlessly when the image boots elsewhere.
#define DSEC_BOOT_TIMER_PORT 0x440
// 123, the value Firecracker's boot timer uses, so traces read the same.
#define DSEC_BOOT_TIMER_VALUE 0x7b
// Written right before a deliberate reboot: "this reboot is the guest's clean exit". A
// reboot without it, from a guest whose init speaks this protocol, is a crash (a kernel
// panic with panic=-1 also reboots).
#define DSEC_BOOT_TIMER_SHUTDOWN_VALUE 0x7c

#endif  // DSEC_GUEST_INIT_BOOT_TIMER_H
