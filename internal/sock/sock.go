// Package sock reads and writes a TCP connection as net.TCPConn does, but
// makes each read and write of the socket, which is non-blocking and so
// never blocks, as a raw system call: without the runtime's bookkeeping
// around a call that may block (entersyscall, exitsyscall).
//
// That bookkeeping costs more than its own instructions: the first such
// call after every moment the process had nothing to run wakes the
// runtime's monitor thread (sysmon, a futex wake-up), which then polls
// every 20 µs for a while, each time a sleep and two context switches. A
// proxy under a load that leaves it idle between batches of replies pays
// that many times a second; and a call that takes longer than 20 µs may
// have its thread's P handed to another thread meanwhile.
//
// Waiting for input or for room to write, deadlines and Close work as on
// the net.TCPConn (through its syscall.RawConn), and the errors are the
// same values, wrapped the same way.
package sock
