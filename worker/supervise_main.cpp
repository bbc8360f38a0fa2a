// gatos-supervise: the per-job supervisor the worker starts (exec.h). It is a
// separate small program so that starting it copies nothing of the worker.
#include "gatos/exec.h"

int main(int argc, char** argv) { return gatos::SuperviseMain(argc, argv); }
