package bridge

// ioctlFIONREAD asks how many bytes wait to be read on a socket:
// FIONREAD, _IOR('f', 127, int) in <sys/filio.h>, which x/sys/unix does
// not define for darwin.
const ioctlFIONREAD = 0x4004667f
