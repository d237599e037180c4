package taskstats

import (
	"syscall"
	"unsafe"
)

// threadCPU is the CPU time the calling OS thread has used, in
// nanoseconds (clock_gettime CLOCK_THREAD_CPUTIME_ID): a read timed by it
// on a locked thread measures its own work, without the time the
// machine's other work kept it off a core.
func threadCPU() (int64, bool) {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
