#!/usr/bin/env python3
"""Generates a synthetic msMemScope-format dump (current format: ns times, hex Ptr,
allocation_id) for the analysis benchmark.

Rows are written the way msMemScope writes them: launch and msTX rows as they happen, a
block's MALLOC/ACCESS/FREE rows together when the block dies, synthetic FREEs (shadow:true)
at exit for blocks still alive. The workload is a training loop: `step start` msTX ranges,
ATen ops that allocate, use and free PTA blocks, a kernel launch per op, some weights alive
for the whole run and one leaked block per step.

With --id-order every row is written when its event happens, i.e. in ID order, as memscope
writes its own dumps.

usage: gen_dump.py ROWS OUT.csv [--seed N] [--id-order]
"""
import random
import sys

HEADER = ("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,"
          "Call Stack(Python),Call Stack(C)\n")
PID = 4242


def main():
    rows_wanted = int(sys.argv[1])
    out = sys.argv[2]
    args = sys.argv[3:]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    id_order = "--id-order" in args
    rnd = random.Random(seed)
    f = open(out, "w", buffering=1 << 22)
    f.write(HEADER)
    st = {"id": 0, "ts": 1_764_753_083_000_000_000, "alloc": 0, "used": 0, "rows": 0}
    buf = []
    live = {}  # alloc_id -> [addr, size, rows]
    next_addr = [0x12C0_0000_0000]

    def nid():
        st["id"] += 1
        st["ts"] += rnd.randint(50, 500)
        st["rows"] += 1  # one row per event, whenever it is written
        return st["id"], st["ts"]

    def emit(line):
        buf.append(line)
        if len(buf) >= 100_000:
            f.write("".join(buf))
            buf.clear()

    def launch(kind, etype, name, attr=""):
        i, ts = nid()
        emit(f'{i},{kind},{etype},{name},{ts},{PID},{PID},0,N/A,{attr},,\n')

    def malloc(size):
        i, ts = nid()
        st["alloc"] += 1
        a = st["alloc"]
        addr = next_addr[0]
        next_addr[0] += (size + 511) // 512 * 512
        st["used"] += size
        attr = f'"{{allocation_id:{a},addr:0x{addr:016x},size:{size},total:21474836480,used:{st["used"]}}}"'
        row = f'{i},MALLOC,PTA,N/A,{ts},{PID},{PID},0,0x{addr:016x},{attr},,\n'
        if id_order:
            emit(row)
        live[a] = [addr, size, [] if id_order else [row]]
        return a

    def access(a, op):
        i, ts = nid()
        addr, size, rows = live[a]
        rw = "WRITE" if rnd.random() < 0.3 else "READ"
        row = (f'{i},ACCESS,{rw},{op},{ts},{PID},{PID},0,0x{addr:016x},'
               f'"{{allocation_id:{a},addr:0x{addr:016x},size:{size},type:PTA,dtype:torch.float32,shape:torch.Size([{size // 4}])}}",,\n')
        if id_order:
            emit(row)
        else:
            rows.append(row)

    def free(a, shadow=False):
        i, ts = nid()
        addr, size, rows = live.pop(a)
        st["used"] -= size
        extra = ",shadow:true" if shadow else ""
        rows.append(f'{i},FREE,PTA,N/A,{ts},{PID},{PID},0,0x{addr:016x},'
                    f'"{{allocation_id:{a},addr:0x{addr:016x},size:{size},total:21474836480,used:{st["used"]}{extra}}}",,\n')
        for r in rows:
            emit(r)

    weights = [malloc(rnd.choice([4096, 65536, 1 << 20])) for _ in range(64)]
    ops = ["aten::addmm", "aten::relu", "aten::mm", "aten::add_", "aten::mul", "aten::sum", "aten::t", "aten::view"]
    step = 0
    activations = []
    while st["rows"] < rows_wanted:
        step += 1
        launch("MSTX", "Range_start", '"step start"', f'"{{range_id:{step}}}"')
        for k in range(200):
            op = rnd.choice(ops)
            launch("OP_LAUNCH", "ATEN_START", op)
            w = rnd.choice(weights)
            access(w, op)
            a = malloc(rnd.choice([512, 2048, 8192, 65536]))
            access(a, op)
            launch("KERNEL_LAUNCH", "KERNEL_LAUNCH", op.replace("aten::", "") + "_kernel", '"{streamId:1,taskId:%d}"' % k)
            if rnd.random() < 0.5:
                activations.append(a)
            else:
                free(a)
            if len(activations) > 40:
                b = activations.pop(0)
                access(b, op)
                free(b)
            launch("OP_LAUNCH", "ATEN_END", op)
        malloc(4000256)  # leaked once per step
        while activations:
            free(activations.pop())
        launch("MSTX", "Range_end", "Range end from id %d" % step, f'"{{range_id:{step}}}"')
    for a in list(live):
        free(a, shadow=True)
    f.write("".join(buf))
    f.close()
    print(f"{out}: {st['rows']} rows, {step} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
