#!/usr/bin/perl
# Drives MR::Tarantool::Box (Debian's libmr-tarantool-perl, a Tarantool 1.5
# client) for tests/e2e/test_legacy15_perl.py: one JSON command per stdin
# line, one JSON answer per stdout line, one connection for the whole run.
#
#   in:  {"name": "queue.put", "args": ["<hex>", ...], "format": "&&&&*"}
#   out: {"tuples": [[field, ...], ...]}    & and $ fields as hex, others as numbers
#        {"error": <return code>, "message": "<ErrorStr>"}
#
# `format` is MR::Tarantool::Box's unpack format of the reply tuples. End of
# input closes the connection.
use strict;
use warnings;
use JSON::PP;
use MR::Tarantool::Box;

my $port = shift or die "usage: $0 PORT\n";
my $box = MR::Tarantool::Box->new({
    servers => "127.0.0.1:$port",
    name    => "queue",
    timeout => 30,
    raise   => 0,
    spaces  => [{
        space   => 0,
        name    => "queue",
        format  => "&*",
        indexes => [{ index_name => "id", keys => [0] }],
    }],
});
my $json = JSON::PP->new->canonical;
$| = 1;

while (my $line = <STDIN>) {
    my $cmd = $json->decode($line);
    my @args = map { pack("H*", $_) } @{ $cmd->{args} };
    my $tuples = $box->Call($cmd->{name}, \@args, { unpack_format => $cmd->{format} });
    if (!$tuples) {
        print $json->encode({ error => $box->Error, message => $box->ErrorStr }), "\n";
        next;
    }
    (my $kinds = $cmd->{format}) =~ s/[()*]//g;
    my @kinds = split //, $kinds;
    my @out;
    for my $tuple (@$tuples) {
        my @fields;
        for my $i (0 .. $#$tuple) {
            my $kind = $kinds[$i < @kinds ? $i : -1];
            push @fields, $kind =~ /[&\$]/ ? unpack("H*", $tuple->[$i]) : 0 + $tuple->[$i];
        }
        push @out, \@fields;
    }
    print $json->encode({ tuples => \@out }), "\n";
}
