// gatos-supervise: the supervisor the worker starts (gatos/exec/exec.h), once per
// job (Execution::Start) or once per slot (JobLauncher, which keeps it for
// job after job). It is a separate small program so that starting it copies
// nothing of the worker.
#include "gatos/exec/exec.h"

int main(int argc, char** argv) { return gatos::SuperviseMain(argc, argv); }
