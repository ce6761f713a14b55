#!/usr/bin/env bash
# write_verdicts (scripts/gpu-acceptance.sh, what --pack-out writes as verdicts.tsv) on a summary.md
# whose commands hold '|' — escaped as step() writes it ('\|'), bare, and after a backslash — and
# backticks: one line per command after the header, six columns on every line, each command as it
# was run, the plan tables left out. Then every committed report under reports/gpu/: its
# verdicts.tsv is what write_verdicts makes of its summary.md, one line per command row.
#   gpu_acceptance_verdicts.sh REPO SCRATCH
# shellcheck disable=SC2016  # the backticks are Markdown, written literally
set -u
repo=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 2
fails=0
check() {  # check WHAT EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
# shellcheck source=../../scripts/gpu-acceptance.sh
VALIDATE_ACCEPTANCE_LIB=1 source "$repo/scripts/gpu-acceptance.sh"

# The commands, as run, and the summary row step() writes for each ('|' shown as '\|').
names=(gate-a gate-b bench c-backslash plain)
cmds=(
  'validate compare R X --variant ^fwd=(IMPLICIT_GEMM|GEMM),bwd_data=(ALGO_0|ALGO_1)$|^$ --json a.json'
  'validate compare R X --only ^float32/([^/]+/conv2d/output|k[^/]+/conv2d/grad_bias)$ --gate float32.rtol=0'
  "bash -c set -o pipefail; 'bench_gpu_permute' | tee 'bench.md'"
  'grep -E a\|b file'
  'env_report'
)
s=$work/summary.md
{
  echo "# GPU acceptance — test"
  echo
  echo "| step | estimated s | peak disk | keeps | what |"
  echo "|---|---:|---:|---:|---|"
  echo "| smoke | 61 | 42.7 MB | 0 B | smoke: refs cpu+cuda, tf32 |"
  echo
  echo "| step | command | expect | exit | verdict | seconds |"
  echo "|---|---|---|---:|---|---:|"
  for i in "${!names[@]}"; do
    shown=${cmds[$i]//|/\\|}
    printf '| %s | `%s` | %s | %d | %s | %s |\n' "${names[$i]}" "$shown" pass 0 ok 1.5
  done
  # a row written by hand with a bare '|' and a backtick inside the command
  printf '| %s | `%s` | %s | %d | %s | %s |\n' hand 'a | b `c` d' record 1 BAD 0.0
} >"$s"
names+=(hand)
cmds+=('a | b `c` d')

write_verdicts "$s" >"$work/verdicts.tsv"
check "one line per command plus the header" $((${#names[@]} + 1)) "$(wc -l <"$work/verdicts.tsv")"
check "six columns on every line" 6 "$(awk -F'\t' '{print NF}' "$work/verdicts.tsv" | sort -u | tr '\n' ' ' | sed 's/ $//')"
check "the header" $'step\tcommand\texpect\texit\tverdict\tseconds' "$(head -1 "$work/verdicts.tsv")"
i=0
while IFS=$'\t' read -r name cmd _; do
  check "row $((i + 1)) step" "${names[$i]}" "$name"
  check "row $((i + 1)) command round-trips" "${cmds[$i]}" "$cmd"
  i=$((i + 1))
done < <(tail -n +2 "$work/verdicts.tsv")
check "the hand row's last four columns" $'record\t1\tBAD\t0.0' "$(tail -1 "$work/verdicts.tsv" | cut -f3-)"
check "the first row's last four columns" $'pass\t0\tok\t1.5' "$(sed -n 2p "$work/verdicts.tsv" | cut -f3-)"

# The committed reports: verdicts.tsv regenerated from summary.md with this writer.
n=0
while IFS= read -r sum; do
  dir=$(dirname "$sum")
  [[ -f $dir/verdicts.tsv ]] || continue
  n=$((n + 1))
  rows=$(grep -c '^| [^|]* | `' "$sum")
  check "${sum#"$repo"/}: one line per command row" $((rows + 1)) "$(wc -l <"$dir/verdicts.tsv")"
  check "${sum#"$repo"/}: six columns" 6 "$(awk -F'\t' '{print NF}' "$dir/verdicts.tsv" | sort -u | tr '\n' ' ' | sed 's/ $//')"
  if write_verdicts "$sum" | cmp -s - "$dir/verdicts.tsv"; then
    echo "ok: ${dir#"$repo"/}/verdicts.tsv is write_verdicts of its summary.md"
  else
    echo "FAIL: ${dir#"$repo"/}/verdicts.tsv differs from write_verdicts of its summary.md"
    fails=$((fails + 1))
  fi
done < <(find "$repo/reports/gpu" -name summary.md | sort)
echo "$n committed report folder(s) checked"
echo "$fails failure(s)"
((fails == 0))
