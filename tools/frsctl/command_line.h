// frsctl/command_line.h: frsctl's whole command line as a function, so that
// the program (main.cc) and the tests that run many commands (one program
// start each cost 0.1-0.2 CPU-s under the sanitizers) run the same code.
//
// RunCommandLine(argc, argv) parses argv as `frsctl ARGS...` does, runs the
// command and returns the exit code frsctl would exit with (session.h). It
// reads standard input and writes standard output and error through the C
// streams (stdio); what stdout still buffers is its caller's to flush (a
// program's exit does). It installs nothing in the process: the
// SIGINT/SIGTERM handler that asks a walk to stop (without it a signal
// kills), the SIGBUS guard of mapped files and stdout's buffer are main.cc's.
// But what a command does to its process, it does to the caller's:
//   - run as root on a store directory another user owns, it becomes that
//     user for good (setresuid, session.h), as the program does;
//   - with FRS_TEST_HANDOFF_CRASH set, handoff's crash points _exit(137);
//   - with FRS_TEST_GROW_BEFORE_SWAP set, grow waits for that file before
//     its swap (the tests run grow as a program).
//
// Thread safety: one call at a time per process (standard streams, the
// once-a-run notes of node_out.h).
#pragma once

namespace frs::ctl {

int RunCommandLine(int argc, char** argv);

}  // namespace frs::ctl
