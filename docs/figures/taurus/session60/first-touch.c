#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){size_t n=(size_t)atol(v[1])<<20;int huge=atoi(v[2]);
char*p=mmap(0,n+(2<<20),PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
p=(char*)(((unsigned long)p+(2<<20)-1)&~((2UL<<20)-1));
madvise(p,n,huge?MADV_HUGEPAGE:MADV_NOHUGEPAGE);
double t=now();for(size_t i=0;i<n;i+=4096)p[i]=1;double a=now()-t;
t=now();memset(p,2,n);double b=now()-t;
printf("%s %zu MiB first touch %.1f ms (%.2f GB/s), memset after %.1f ms\n",huge?"huge":"small",n>>20,a*1e3,n/a/1e9,b*1e3);}
