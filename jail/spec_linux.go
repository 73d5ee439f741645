package jail

// spec is what the front sends the jail's init on file descriptor 3, as
// JSON: everything init needs to build the program's view and run it.
type spec struct {
	Argv      []string    `json:"argv"`
	Env       []string    `json:"env"`
	Dir       string      `json:"dir"`
	Hostname  string      `json:"hostname"`
	System    []string    `json:"system"`
	Binds     []Bind      `json:"binds"`
	Overlays  []Overlay   `json:"overlays"`
	Files     []File      `json:"files"`
	Transform []Transform `json:"transform"`
	TmpSize   int64       `json:"tmp_size"`
	Limits    Limits      `json:"limits"`
	Seccomp   bool        `json:"seccomp"`
}

// The file descriptors a jail's init is started with, beyond 0, 1 and 2.
const (
	fdSpec   = 3 // the spec, read then closed
	fdResult = 4 // the program's result channel, left open for it
	fdStatus = 5 // init's report of a failed setup; close-on-exec, so EOF means the program started
)

// envInit marks a process as a jail's init (MaybeInit).
const envInit = "CAPBRIDGE_JAIL_INIT"
