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
	// Warm: init starts the runtime and waits for a delivery (after the
	// spec, on the same descriptor) before the program runs.
	Warm bool `json:"warm"`
}

// delivery is what a warm jail's init is sent when its program is to run.
type delivery struct {
	Files     []File      `json:"files"`
	Transform []Transform `json:"transform"`
	Env       []string    `json:"env"`
}

// The file descriptors a jail's init is started with, beyond 0, 1 and 2.
const (
	fdSpec   = 3 // the spec, read then closed
	fdResult = 4 // the program's result channel, left open for it
	fdStatus = 5 // init's report of a failed setup; close-on-exec, so EOF means the program started
)

// envInit marks a process as a jail's init (MaybeInit).
const envInit = "CAPBRIDGE_JAIL_INIT"
