# The warm shells' launcher (see shell-launcher.ts), run as `/bin/sh -c "$(cat shell-launcher.sh)" sh DIR
# [LC_ALL]`. It reads requests on stdin (`make IDS`: the FIFOs of each id; `start IDS`: a watcher and
# a shell for each) and reports on stdout. A watcher opens each FIFO read-write first, so that opening
# its own end never blocks, whatever the server has already closed, and keeps its shell's pid in
# DIR/ID.pid while the shell runs. At the end of its input (the server closed it or died) it says
# `end`: a server that retired it reads that and the commands running go on; a server that is gone
# reads nothing, and they are killed. Then it removes DIR.
d=$1
[ $# -gt 1 ] && lc=$2
# The server is gone (a write to it failed): every shell's process group is killed, the command and
# what it started in the background, and DIR removed (a trapped signal is back to its default in the
# watchers and shells).
orphaned() {
  for pid in "$d"/*.pid; do
    [ -f "$pid" ] && kill -s KILL -- "-$(cat "$pid")" 2>/dev/null
  done
  rm -rf "$d"
  exit
}
trap orphaned PIPE
# A shell: env restores SIGINT and SIGQUIT, which a command started with & ignores; setsid and env
# run in the C locale, which they start faster in, and the shell gets back the server's LC_ALL.
shell() {
  export LC_ALL=C
  if [ -n "${lc+set}" ]; then
    exec setsid env --default-signal=INT,QUIT "LC_ALL=$lc" /bin/sh -s
  else
    exec setsid env -u LC_ALL --default-signal=INT,QUIT /bin/sh -s
  fi
}
for tool in mkfifo setsid env; do
  command -v $tool >/dev/null || { echo "unsupported: no $tool"; exit 0; }
done
env --default-signal=INT true 2>/dev/null || { echo "unsupported: env has no --default-signal"; exit 0; }
while read -r op ids; do
  case $op in
  make)
    set --
    for id in $ids; do set -- "$@" "$d/$id.c" "$d/$id.o" "$d/$id.e"; done
    if mkfifo -m 600 "$@" 2>/dev/null; then echo "made $ids"; else echo "failed $ids"; fi ;;
  start)
    for id in $ids; do
      (
        command exec 2>/dev/null 7<>"$d/$id.c" 8<>"$d/$id.o" 9<>"$d/$id.e" || { echo "failed $id"; exit; }
        exec 4<"$d/$id.c" 5>"$d/$id.o" 6>"$d/$id.e" 7<&- 8<&- 9<&-
        shell <&4 >&5 2>&6 4<&- 5>&- 6>&- &
        echo $! >"$d/$id.pid"
        echo "ready $id $!"
        exec 4<&- 5>&- 6>&-
        wait $!
        status=$?
        rm -f "$d/$id.pid"
        echo "exit $id $status"
      ) &
    done
    jobs >/dev/null ;;
  esac
done
echo end
rm -rf "$d"
