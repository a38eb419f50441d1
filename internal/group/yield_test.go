package group

import "runtime"

func yieldRuntime() { runtime.Gosched() }
