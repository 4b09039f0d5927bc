#!/usr/bin/env python3
"""End-to-end data-path benchmark (issue 9), one run prints everything.

For each workload (churn: `churn 5 2 42`; threadsN: 2 M malloc(64)/free pairs on N = 1, 4, 16
or 64 threads; storm64: 32 rounds of 64 short-lived threads, 1000 pairs each) and each tool
(memscope with its default outputs, with --call-stack c:32, with HOST rows as CSV (--host-rows)
or SQLite (--format db --host-rows), and heaptrack), N paired runs alternate the uninstrumented
job and the tool.
Printed per cell: wall and CPU (user+sys of the whole tree) ratio, median (min-max) of the
pairs; peak RSS of the collector (VmHWM of the memscope process, or of heaptrack_interpret,
polled every 20 ms) and of the largest process of the tree (ru_maxrss); output bytes at rest
and bytes per heap call, capture bytes per heap call, rows written per CPU-second of the whole
run and the tool's CPU ns per heap call (its CPU less the bare run's). Then issue 37's targets,
each judged on these figures: met or not. Runs are started by spawn (a small launcher, see
benches/host/lib/spawn.c) so peak RSS has no Python floor.
"""
import argparse, os, re, shutil, statistics, subprocess, sys, tempfile, time

def tree_hwm(root_pid):
    """Max VmHWM (KiB) per command name over the processes of root_pid's group."""
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                st = f.read()
            rest = st.rsplit(')', 1)[1].split()
            if int(rest[2]) != root_pid:      # pgrp
                continue
            comm = st[st.index('(') + 1:st.rindex(')')]
            with open(f'/proc/{d}/status') as f:
                for line in f:
                    if line.startswith('VmHWM:'):
                        kb = int(line.split()[1])
                        out[comm] = max(out.get(comm, 0), kb)
        except (OSError, ValueError, IndexError):
            pass
    return out

def run_one(spawn, argv, outdir, env=()):
    so, se = os.path.join(outdir, '.stdout'), os.path.join(outdir, '.stderr')
    p = subprocess.Popen([spawn, so, se, *env, '--', *argv], stdout=subprocess.PIPE, text=True)
    child, hwm = None, {}
    while p.poll() is None:
        if child is None:
            try:
                with open(f'/proc/{p.pid}/task/{p.pid}/children') as f:
                    c = f.read().split()
                    child = int(c[0]) if c else None
            except OSError:
                pass
        if child:
            for k, v in tree_hwm(child).items():
                hwm[k] = max(hwm.get(k, 0), v)
        time.sleep(0.02)
    wall, maxrss, user, sys_, code = p.stdout.read().split()
    return dict(wall=float(wall), maxrss=int(maxrss), cpu=float(user) + float(sys_),
                code=int(code), hwm=hwm, stdout=open(so).read(), stderr=open(se).read())

def dir_bytes(d):
    n = 0
    for r, _, fs in os.walk(d):
        for f in fs:
            if not f.startswith('.std'):
                n += os.path.getsize(os.path.join(r, f))
    return n

def calls(stdout):
    m = re.search(r'total=(\d+)', stdout)
    return int(m.group(1)) if m else None

def run_rows(outdir):
    """Rows the run wrote, from its run index (None without one)."""
    try:
        import json
        with open(os.path.join(outdir, 'memscope_run.json')) as f:
            idx = json.load(f)
        return sum(p.get('rows', 0) for r in idx['runs'] for p in r['processes'])
    except (OSError, ValueError, KeyError):
        return None

def capture_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d)
               for f in fs if f.endswith('.mscap'))

def med(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', required=True)
    ap.add_argument('--memscope', required=True)
    ap.add_argument('--memscope-base', help="another build's memscope (same profile): adds the tools "
                    "base, base-c32 and base-csv, its runs paired with the others in the same run")
    ap.add_argument('-n', type=int, default=3)
    ap.add_argument('--workloads', default='churn,threads1,threads4,threads16,threads64,storm64')
    ap.add_argument('--tools', help="tools for every workload (default: the cells issue 37's targets "
                    "need: churn with memscope, memscope-c32, memscope-csv, memscope-db and heaptrack; "
                    "the thread workloads with memscope and heaptrack)")
    a = ap.parse_args()
    spawn = os.path.join(a.build, 'spawn')
    workloads = {
        'churn': [os.path.join(a.build, 'churn'), '5', '2', '42'],
        'threads1': [os.path.join(a.build, 'threads'), '1', '2000000'],
        'threads4': [os.path.join(a.build, 'threads'), '4', '500000'],
        'threads16': [os.path.join(a.build, 'threads'), '16', '125000'],
        'threads64': [os.path.join(a.build, 'threads'), '64', '31250'],
        'storm64': [os.path.join(a.build, 'storm'), '64', '32', '1000'],
    }
    ms = a.memscope
    tools = {
        'memscope': lambda o: [ms, 'run', '-q', '--adapters', 'host', '-o', o, '--'],
        'memscope-c32': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--call-stack', 'c:32', '-o', o, '--'],
        'memscope-csv': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--host-rows', '-o', o, '--'],
        'memscope-db': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--format', 'db', '--host-rows', '-o', o, '--'],
        # aggregate mode (issue 38): per-site totals, no rows, no capture
        'memscope-agg': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--aggregate', '-o', o, '--'],
        'memscope-c32-agg': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--call-stack', 'c:32', '--aggregate', '-o', o, '--'],
        # flight recorder (issue 38): the last 64 MiB of rows, no capture
        'memscope-keep': lambda o: [ms, 'run', '-q', '--adapters', 'host', '--keep', 'last:64MiB', '-o', o, '--'],
        'heaptrack': lambda o: ['heaptrack', '-o', os.path.join(o, 'ht'), '--'],
    }
    if a.memscope_base:
        mb = a.memscope_base
        tools['base'] = lambda o: [mb, 'run', '-q', '--adapters', 'host', '-o', o, '--']
        tools['base-c32'] = lambda o: [mb, 'run', '-q', '--adapters', 'host', '--call-stack', 'c:32', '-o', o, '--']
        tools['base-csv'] = lambda o: [mb, 'run', '-q', '--adapters', 'host', '--host-rows', '-o', o, '--']
    print(f"load at start: {os.popen('uptime').read().strip()}")
    print(f"memscope: {ms}; base: {a.memscope_base}; heaptrack: {shutil.which('heaptrack')}; {a.n} paired runs per cell")
    scratch = tempfile.mkdtemp(prefix='memscope-datapath-')
    rows = []
    for w in a.workloads.split(','):
        argv = workloads[w]
        default = 'memscope,memscope-c32,memscope-csv,memscope-db,heaptrack' if w == 'churn' \
            else 'memscope,heaptrack'
        for t in (a.tools or default).split(','):
            if t == 'heaptrack' and not shutil.which('heaptrack'):
                print(f"{w} {t}: heaptrack not installed, skipped")
                continue
            wr, cr, coll, tree, out_b, bpe, plain_w = [], [], [], [], [], [], []
            walls, cap_b, rps, ns_ev = [], [], [], []
            for i in range(a.n):
                pd = tempfile.mkdtemp(dir=scratch)
                plain = run_one(spawn, argv, pd)
                od = tempfile.mkdtemp(dir=scratch)
                r = run_one(spawn, tools[t](od) + argv, od)
                if r['code'] != 0:
                    print(f"{w} {t}: exit {r['code']}: {r['stderr'][-500:]}")
                n_calls = calls(plain['stdout']) or 1
                wr.append(r['wall'] / plain['wall'])
                cr.append(r['cpu'] / plain['cpu'])
                plain_w.append(plain['wall'])
                hw = r['hwm']
                coll.append(max([v for k, v in hw.items() if k.startswith('memscope') or k.startswith('heaptrack_int')] or [0]) / 1024)
                tree.append(r['maxrss'] / 1024)
                b = dir_bytes(od)
                out_b.append(b)
                bpe.append(b / n_calls)
                walls.append(r['wall'])
                cap_b.append(capture_bytes(od) / n_calls)
                rows_w = run_rows(od)
                if rows_w:
                    rps.append(rows_w / r['cpu'])
                ns_ev.append((r['cpu'] - plain['cpu']) / n_calls * 1e9)
                shutil.rmtree(pd, ignore_errors=True)
                shutil.rmtree(od, ignore_errors=True)
            rows.append((w, t, med(wr), med(cr), statistics.median(coll), statistics.median(tree),
                         statistics.median(out_b) / 2**20, statistics.median(bpe),
                         statistics.median(plain_w), statistics.median(walls),
                         statistics.median(cap_b), statistics.median(rps) if rps else None,
                         statistics.median(ns_ev), statistics.median(wr)))
            print(f"{w:9} {t:13} wall {med(wr)}  cpu {med(cr)}  collector {statistics.median(coll):.1f} MiB  "
                  f"tree {statistics.median(tree):.1f} MiB  out {statistics.median(out_b)/2**20:.1f} MiB  "
                  f"{statistics.median(bpe):.2f} B/call", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    print()
    print("| workload | tool | wall ratio, median (min-max) | CPU ratio | collector peak RSS MiB | largest process MiB | output MiB | bytes/call | capture bytes/call | rows per CPU-s | CPU ns/call | wall s | plain wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rps = f"{r[11] / 1e6:.2f} M" if r[11] else "-"
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.1f} | {r[7]:.2f} | "
              f"{r[10]:.2f} | {rps} | {r[12]:.0f} | {r[9]:.3f} | {r[8]:.3f} |")
    targets(rows)
    print(f"\nload at end: {os.popen('uptime').read().strip()}")

def targets(rows):
    """Issue 37's targets, judged on this run's figures (a target whose cells were not run is
    said so, never called met)."""
    cell = {(r[0], r[1]): r for r in rows}
    out = []
    def judge(name, ok, figure):
        out.append((name, ok, figure))
    for w in ('threads4', 'threads16', 'storm64'):
        m, h = cell.get((w, 'memscope')), cell.get((w, 'heaptrack'))
        if m and h:
            x = m[9] / h[9]
            judge(f"{w}: wall <= 1/3 of heaptrack's", x <= 1 / 3, f"{x:.2f}x heaptrack ({m[9]:.3f} s against {h[9]:.3f} s)")
        else:
            judge(f"{w}: wall <= 1/3 of heaptrack's", None, "not run (needs memscope and heaptrack)")
    per = [(w, cell[(w, 'memscope')][12]) for w in ('threads1', 'threads4', 'threads16', 'threads64')
           if (w, 'memscope') in cell]
    if len(per) == 4:
        lo, hi = min(v for _, v in per), max(v for _, v in per)
        judge("CPU ns per event flat from 1 to 64 threads (within 20 %)", hi <= 1.2 * lo,
              ", ".join(f"{w} {v:.0f}" for w, v in per) + f" ns (max/min {hi / lo:.2f})")
    else:
        judge("CPU ns per event flat from 1 to 64 threads (within 20 %)", None, "not run (needs threads1,4,16,64)")
    c = cell.get(('churn', 'memscope'))
    judge("churn: capture <= 3 bytes per HOST event", c and c[10] <= 3,
          f"{c[10]:.2f} B" if c else "not run")
    for t, lim in (('memscope', 2.5), ('memscope-c32', 3.5), ('memscope-csv', 5.0)):
        c = cell.get(('churn', t))
        judge(f"churn {t}: wall <= {lim}x the bare run", c and c[13] <= lim,
              f"{c[13]:.2f}x" if c else "not run")
    for t, lim in (('memscope-db', 1e6), ('memscope-csv', 2e6)):
        c = cell.get(('churn', t))
        judge(f"churn {t}: >= {lim / 1e6:.0f} M rows per CPU-second", c and c[11] and c[11] >= lim,
              f"{c[11] / 1e6:.2f} M" if c and c[11] else "not run")
    print("\nIssue 37's targets (this run):")
    for name, ok, fig in out:
        state = "met" if ok else ("NOT RUN" if ok is None or fig.startswith("not run") else "NOT met")
        print(f"- {state}: {name}: {fig}")
    met = sum(1 for _, ok, _ in out if ok)
    print(f"{met} of {len(out)} met" + (" - all targets met" if met == len(out) else ""))

if __name__ == '__main__':
    main()
