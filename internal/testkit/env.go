package testkit

// Env is an environment for the stage, read through Lookup as
// os.LookupEnv would read the process's.
type Env map[string]string

// Lookup reads one variable, like os.LookupEnv.
func (e Env) Lookup(k string) (string, bool) {
	v, ok := e[k]
	return v, ok
}
