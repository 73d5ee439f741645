package main

import "golang.org/x/sys/unix"

// ioctlReadTermios reads a terminal's attributes (tcgetattr(3)).
const ioctlReadTermios = unix.TIOCGETA
