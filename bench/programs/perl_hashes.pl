# Perl's allocation patterns: a hash of 50,000 keys whose values (arrays and strings) are
# replaced, strings split and joined, a sort of records. ARGV[0]: the replacements.
use strict;
use warnings;
my $n = $ARGV[0] // 600_000;
my %h;
for my $i (1 .. $n) {
  $h{"k" . ($i % 50_000)} = [$i, "v$i" x (1 + $i % 5), { id => $i }];
}
my $text = join(",", map { "w$_" } 1 .. 200_000);
my $words = 0;
for (1 .. 5) { my @w = split /,/, $text; $words += @w; $text = join(";", reverse @w); $text =~ tr/;/,/; }
my @recs = sort { $a->[1] <=> $b->[1] } map { [$_, ($_ * 7919) % 100_003] } 1 .. 200_000;
print scalar(keys %h), " $words $recs[0][0]\n";
