//go:build linux

package pgwire

// A minimal io_uring (io_uring_setup(2), io_uring_enter(2)) for the event
// loop: receive, send, read and cancel entries, submitted and waited for in
// one system call. Only the goroutine that made a ring, locked to its
// thread, may use it (IORING_SETUP_SINGLE_ISSUER).

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	sysIOUringSetup = 425 // the same on every architecture
	sysIOUringEnter = 426

	ioringSetupSubmitAll    = 1 << 7
	ioringSetupCoopTaskrun  = 1 << 8
	ioringSetupSingleIssuer = 1 << 12
	ioringSetupDeferTaskrun = 1 << 13

	ioringFeatSingleMmap = 1 << 0
	ioringFeatNoDrop     = 1 << 1

	ioringEnterGetevents = 1 << 0
	ioringEnterExtArg    = 1 << 3

	ioringOffSQRing = 0
	ioringOffSQEs   = 0x10000000

	// ioringRecvsendPollFirst (sqe ioprio of a receive): arm the poll at
	// once rather than try the receive first (Linux 5.19).
	ioringRecvsendPollFirst = 1 << 0

	ioringOpAsyncCancel = 14
	ioringOpRead        = 22
	ioringOpSend        = 26
	ioringOpRecv        = 27

	sqeSize = 64
	cqeSize = 16
)

// ioUringParams is struct io_uring_params.
type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, flags, dropped, array, resv1, user_addr (u64)
	cqOff                                                                  [10]uint32 // head, tail, ring_mask, ring_entries, overflow, cqes, flags, resv1, user_addr (u64)
}

// sqe is struct io_uring_sqe, for the operations used here.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32
	userData uint64
	_        [24]byte
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is one io_uring instance with its rings mapped.
type ring struct {
	fd     int
	mem    []byte // submission and completion rings (one mapping)
	sqeMem []byte

	sqHead, sqTail, cqHead, cqTail *uint32
	sqMask, cqMask                 uint32
	sqes                           []sqe
	cqes                           []cqe
	tail                           uint32 // the next free entry, published by enter

	// The wait's bound (enter), where the kernel reads it.
	waitArg     getEventsArg
	waitTimeout kernelTimespec
}

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64
}

type kernelTimespec struct{ sec, nsec int64 }

// ringMaxWait bounds each wait in the kernel: the loop's goroutine comes
// back to Go code at least this often, so the runtime can stop it (a
// garbage collection's stop-the-world) even without the preemption signal
// (GODEBUG=asyncpreemptoff=1), and goroutines it readied that no other
// processor took run on its own.
const ringMaxWait = 5 * time.Millisecond

// newRing sets up a ring of entries submission entries. It fails where
// io_uring is missing, disabled (kernel.io_uring_disabled) or older than
// Linux 6.1 (IORING_SETUP_DEFER_TASKRUN).
func newRing(entries uint32) (*ring, error) {
	p := ioUringParams{flags: ioringSetupSubmitAll | ioringSetupCoopTaskrun | ioringSetupSingleIssuer | ioringSetupDeferTaskrun}
	fd, _, e := syscall.Syscall(sysIOUringSetup, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, os.NewSyscallError("io_uring_setup", e)
	}
	r := &ring{fd: int(fd)}
	if p.features&ioringFeatSingleMmap == 0 || p.features&ioringFeatNoDrop == 0 {
		r.close()
		return nil, os.NewSyscallError("io_uring_setup", syscall.ENOSYS)
	}
	sqLen := p.sqOff[6] + p.sqEntries*4
	cqLen := p.cqOff[5] + p.cqEntries*cqeSize
	size := max(sqLen, cqLen)
	var err error
	r.mem, err = syscall.Mmap(r.fd, ioringOffSQRing, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, os.NewSyscallError("mmap", err)
	}
	r.sqeMem, err = syscall.Mmap(r.fd, ioringOffSQEs, int(p.sqEntries*sqeSize), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, os.NewSyscallError("mmap", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.mem[off]) }
	r.sqHead, r.sqTail = (*uint32)(at(p.sqOff[0])), (*uint32)(at(p.sqOff[1]))
	r.sqMask = *(*uint32)(at(p.sqOff[2]))
	r.cqHead, r.cqTail = (*uint32)(at(p.cqOff[0])), (*uint32)(at(p.cqOff[1]))
	r.cqMask = *(*uint32)(at(p.cqOff[2]))
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqes = unsafe.Slice((*cqe)(at(p.cqOff[5])), p.cqEntries)
	// The submission array maps each slot to the entry of the same index.
	array := unsafe.Slice((*uint32)(at(p.sqOff[6])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	r.waitTimeout = kernelTimespec{nsec: int64(ringMaxWait)}
	r.waitArg.ts = uint64(uintptr(unsafe.Pointer(&r.waitTimeout)))
	return r, nil
}

func (r *ring) close() {
	if r.sqeMem != nil {
		syscall.Munmap(r.sqeMem)
	}
	if r.mem != nil {
		syscall.Munmap(r.mem)
	}
	closeFD(r.fd)
}

// next returns a cleared submission entry, submitting what is queued
// first when the ring is full.
func (r *ring) next() *sqe {
	for r.tail-atomic.LoadUint32(r.sqHead) >= uint32(len(r.sqes)) {
		r.enter(0)
	}
	e := &r.sqes[r.tail&r.sqMask]
	*e = sqe{}
	r.tail++
	return e
}

// recv queues a recv(2) into p. p must be on the heap (the compiler does
// not see it escape here) and stay referenced until its completion.
// Receives are queued when a read found the socket empty (ringRecv.arm),
// so the kernel waits for data first instead of trying the socket first.
func (r *ring) recv(fd int, p []byte, user uint64) {
	e := r.queueIO(ioringOpRecv, fd, p, user)
	e.ioprio = ioringRecvsendPollFirst
}

// send queues a send(2) of p (MSG_NOSIGNAL).
func (r *ring) send(fd int, p []byte, user uint64) {
	e := r.queueIO(ioringOpSend, fd, p, user)
	e.opFlags = syscall.MSG_NOSIGNAL
}

// read queues a read(2) into p.
func (r *ring) read(fd int, p []byte, user uint64) {
	r.queueIO(ioringOpRead, fd, p, user)
}

func (r *ring) queueIO(op uint8, fd int, p []byte, user uint64) *sqe {
	e := r.next()
	e.opcode, e.fd, e.userData = op, int32(fd), user
	e.addr, e.len = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))), uint32(len(p))
	return e
}

// cancel queues the cancellation of the entry queued with user; its own
// completion has user data 0.
func (r *ring) cancel(user uint64) {
	e := r.next()
	e.opcode, e.fd, e.addr = ioringOpAsyncCancel, -1, user
}

// enter submits what is queued and waits for at least wait completions.
// It waits with a raw system call: the thread is the ring's alone, so the
// Go scheduler has nothing to hand over around the wait (and preempts the
// goroutine with a signal, which ends the wait with EINTR, when it must).
func (r *ring) enter(wait uint32) {
	atomic.StoreUint32(r.sqTail, r.tail) // the entries are filled in
	submit := r.tail - atomic.LoadUint32(r.sqHead)
	// GETEVENTS even when not waiting: with DEFER_TASKRUN, completions are
	// posted only then.
	_, _, e := syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(submit), uintptr(wait),
		ioringEnterGetevents|ioringEnterExtArg, uintptr(unsafe.Pointer(&r.waitArg)), unsafe.Sizeof(r.waitArg))
	switch e {
	case 0, syscall.EINTR, syscall.ETIME, syscall.EBUSY, syscall.EAGAIN:
		// Transient: the caller reaps and enters again; the kernel's head
		// says what it took.
	default:
		panic("pgwire: event loop: io_uring_enter: " + e.Error()) // the ring is the loop's alone
	}
}

// reap calls f for each completion ready, in order.
func (r *ring) reap(f func(user uint64, res int32)) {
	head := atomic.LoadUint32(r.cqHead)
	for {
		tail := atomic.LoadUint32(r.cqTail)
		if head == tail {
			return
		}
		for ; head != tail; head++ {
			c := r.cqes[head&r.cqMask]
			atomic.StoreUint32(r.cqHead, head+1)
			f(c.userData, c.res)
		}
	}
}
