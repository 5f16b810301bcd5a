// frsctl/command_line.h: frsctl's whole command line as a function, so that
// the program (main.cc) and the tests that run many commands (one program
// start each cost 0.1-0.2 CPU-s under the sanitizers) run the same code.
//
// RunCommandLine(argc, argv) parses argv as `frsctl ARGS...` does, runs the
// command and returns the exit code frsctl would exit with (session.h). It
// reads standard input and writes standard output and error through the C
// streams (stdio); what stdout still buffers is its caller's to flush (a
// program's exit does). It sets up nothing
// of the process: the SIGINT/SIGTERM handler that asks a walk to stop (its
// absence: a signal kills), the SIGBUS guard of mapped files and stdout's
// buffer are main.cc's.
//
// Thread safety: one call at a time per process (standard streams, the
// once-a-run notes of node_out.h).
#pragma once

namespace frs::ctl {

int RunCommandLine(int argc, char** argv);

}  // namespace frs::ctl
