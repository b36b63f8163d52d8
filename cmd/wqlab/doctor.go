package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/doctor"
)

// newDoctorCmd is `wqlab doctor`: what stands between this machine and
// the latency the lab shows, one check per row with the remedy.
func newDoctorCmd(stdout, stderr io.Writer) *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the privileges, limits and kernel settings that decide queue-to-start latency",
		Long: `doctor checks what stands between this machine and the latency the lab shows:
CAP_SYS_NICE and RLIMIT_RTPRIO/NICE/MEMLOCK, the cgroup's RT budget and seccomp,
kernel.sched_rt_runtime_us, CPU isolation and this process's CPUs, the cpufreq
governor, cpuidle exit latencies and PM QoS (/dev/cpu_dma_latency), steal time,
timer slack, transparent huge pages, irqbalance and IRQ affinity, and tracefs.
Each check prints OK, WARN or FAIL with the value found; WARN and FAIL rows
say why the setting matters and the exact remedy (--verbose: OK rows too).

FAIL means a worker class cannot be used here (SCHED_FIFO refused); WARN
means more latency or risk than needed. A setting this machine does not
have (no cpufreq in a VM) is OK, "not applicable". It changes nothing.
Exit status: 0 when nothing FAILs, 1 otherwise, 2 for a usage error.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := doctor.Run(cmd.Context(), doctorEnv)
			var err error
			if asJSON {
				err = r.WriteJSON(stdout)
			} else {
				err = r.WriteText(stdout, verbose)
			}
			if err != nil {
				return &runFailure{err}
			}
			if r.Failed() {
				return &runFailure{fmt.Errorf("doctor: %d check(s) FAILed", r.Fail)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (checks with id, name, status, value, why, remedy)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "explain the OK checks too")
	return cmd
}

// doctorEnv is where doctor reads; tests point it at fixture trees.
var doctorEnv doctor.Env
