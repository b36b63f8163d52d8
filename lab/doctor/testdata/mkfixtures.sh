#!/bin/sh
# Regenerates the fixture trees good/ and bad/ (procfs, sysfs and /dev
# roots for doctor's tests). Process 4242 is the process under test.
# good: a tuned RT box (4 CPUs, 2-3 isolated, performance, PM QoS held).
# bad:  every problem at once (see doctor_test.go for what each check must say).
set -e
cd "$(dirname "$0")"
rm -rf good bad

w() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" > "$1"; }

status() { # root capeff seccomp cpus
	w "$1/proc/4242/status" "Name:	wqlab
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Ngid:	0
Pid:	4242
PPid:	1
TracerPid:	0
Uid:	1000	1000	1000	1000
Gid:	1000	1000	1000	1000
FDSize:	64
Groups:	1000
NSpid:	4242
Threads:	7
CapInh:	0000000000000000
CapPrm:	$2
CapEff:	$2
CapBnd:	000001ffffffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	$3
Seccomp_filters:	$3
Cpus_allowed:	f
Cpus_allowed_list:	$4
Mems_allowed_list:	0
voluntary_ctxt_switches:	10
nonvoluntary_ctxt_switches:	1"
	w "$1/proc/4242/comm" wqlab
	w "$1/proc/1/comm" systemd
}

limits() { # root rtprio nice memlock
	w "$1/proc/4242/limits" "Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             63438                63438                processes 
Max open files            1024                 524288               files     
Max locked memory         $4             $4             bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       63438                63438                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         $3                    $3                    
Max realtime priority     $2                    $2                    
Max realtime timeout      unlimited            unlimited            us        "
}

cgroup() { # root path rt_runtime
	w "$1/proc/4242/cgroup" "3:cpuset:/
2:cpu,cpuacct:$2
1:name=systemd:$2
0::/"
	w "$1/proc/4242/mountinfo" "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
31 22 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
	w "$1/sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us" 950000
	w "$1/sys/fs/cgroup/cpu,cpuacct/cpu.rt_period_us" 1000000
	w "$1/sys/fs/cgroup/cpu,cpuacct$2/cpu.rt_runtime_us" "$3"
	w "$1/sys/fs/cgroup/cpu,cpuacct$2/cpu.rt_period_us" 1000000
}

stat() { # root steal
	w "$1/proc/stat" "cpu  1000 0 500 8000 10 0 5 $2 0 0
cpu0 250 0 125 2000 3 0 1 0 0 0
intr 1
ctxt 1000
btime 1700000000
processes 100
procs_running 1
procs_blocked 0
softirq 1 0 0 0 0 0 0 0 0 0 0"
}

idle() { # root ncpus governor
	i=0
	while [ $i -lt $2 ]; do
		c="$1/sys/devices/system/cpu/cpu$i"
		w "$c/cpufreq/scaling_governor" "$3"
		w "$c/cpuidle/state0/name" POLL; w "$c/cpuidle/state0/latency" 0; w "$c/cpuidle/state0/disable" 0
		w "$c/cpuidle/state1/name" C1; w "$c/cpuidle/state1/latency" 2; w "$c/cpuidle/state1/disable" 0
		w "$c/cpuidle/state2/name" C6; w "$c/cpuidle/state2/latency" 133; w "$c/cpuidle/state2/disable" 0
		i=$((i + 1))
	done
}

irq() { # root n effective
	w "$1/proc/irq/$2/smp_affinity_list" "0-3"
	w "$1/proc/irq/$2/effective_affinity_list" "$3"
}

# --- good ---
G=good
status $G 0000000000804000 0 2-3          # CAP_SYS_NICE, CAP_IPC_LOCK
limits $G 0 0 unlimited
cgroup $G /rt.slice 500000
w $G/proc/sys/kernel/sched_rt_runtime_us 950000
w $G/proc/sys/kernel/sched_rt_period_us 1000000
w $G/proc/cmdline "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 -- isolcpus=0"
w $G/sys/devices/system/cpu/online 0-3
w $G/sys/devices/system/cpu/isolated 2-3
w $G/sys/devices/system/cpu/nohz_full 2-3
idle $G 4 performance
mkdir -p $G/dev && printf '\000\000\000\000' > $G/dev/cpu_dma_latency   # held at 0 us
stat $G 0
w $G/sys/kernel/mm/transparent_hugepage/enabled "always [madvise] never"
w $G/sys/kernel/mm/transparent_hugepage/defrag "always defer defer+madvise [madvise] never"
mkdir -p $G/proc/irq/0
irq $G 24 0
irq $G 25 1
w $G/sys/kernel/tracing/events/workqueue/workqueue_queue_work/format "name: workqueue_queue_work"
w $G/proc/filesystems "nodev	proc
nodev	tracefs
	ext4"

# --- bad ---
B=bad
status $B 0000000000000000 2 0-1          # no capabilities, a seccomp filter
limits $B 0 0 8388608
cgroup $B /docker/0123abcd 0
w $B/proc/sys/kernel/sched_rt_runtime_us -1
w $B/proc/sys/kernel/sched_rt_period_us 1000000
w $B/proc/cmdline "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=1"
w $B/sys/devices/system/cpu/online 0-1
idle $B 2 powersave
w $B/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor schedutil
mkdir -p $B/dev && printf '\000\224\065\167' > $B/dev/cpu_dma_latency   # 2000000000 (little-endian): none held
stat $B 0
w $B/sys/kernel/mm/transparent_hugepage/enabled "[always] madvise never"
w $B/sys/kernel/mm/transparent_hugepage/defrag "[always] defer defer+madvise madvise never"
w $B/proc/777/comm irqbalance
irq $B 24 0
irq $B 25 1
irq $B 26 0-1
w $B/proc/filesystems "nodev	proc
	ext4"
printf 'PATH=/usr/bin\000GOMAXPROCS=1\000HOME=/root\000' > $B/proc/4242/environ   # fewer Ps than its 2 CPUs
