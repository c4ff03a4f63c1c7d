; Special case I (seed 004, Fig. 9): inside the update loop, u[i] is read,
; updated, read again and updated again. The first read comes before the update
; of its element: consistent version; the second comes after it: working
; version (post-update version switch); both stores: working version.
; RUN: %opt -passes=cairn-versioning -pass-remarks=cairn-versioning -S %s -o - 2>%t.remarks | FileCheck %s
; RUN: FileCheck --check-prefix=REMARK %s < %t.remarks

; REMARK: array 'u' (line 3) versioned in place by special case I (post-update version switch): 1 reads of the consistent version, 1 reads and 2 writes of the working version

declare noalias ptr @malloc(i64)
declare ptr @cairn_versioned_array(ptr, i64, ptr, i32, i32)
declare void @cairn_main_loop_mark()
declare void @observe(i64)
@name = private constant [2 x i8] c"u\00"

define void @update(i64 %n, i64 %iters, double %e, double %f) {
entry:
  %bytes = shl i64 %n, 3
  %m = call ptr @malloc(i64 %bytes)
; The tag's mode argument becomes 0: two versions.
; CHECK: %u = call ptr @cairn_versioned_array(ptr %m, i64 %bytes, ptr @name, i32 3, i32 0)
  %u = call ptr @cairn_versioned_array(ptr %m, i64 %bytes, ptr @name, i32 3, i32 -1)
  %go = icmp sgt i64 %iters, 0
  %nz = icmp ugt i64 %n, 0
  %both = and i1 %go, %nz
  br i1 %both, label %main.ph, label %done

; Before the loop: the pool is opened, the first iteration is 0 or the resumed one,
; and the latch's test decides whether any iteration is left.
; CHECK: main.ph:
; CHECK: [[FIRST:%.*]] = call i64 @cairn_auto_enter(i64 0, i64 %iters, i64 1)
; CHECK: [[TEST:%.*]] = icmp slt i64 [[FIRST]], %iters
; CHECK: br i1 [[TEST]], label %{{.*}}, label %done.loopexit
main.ph:
  br label %main

; CHECK: main:
; CHECK: [[C:%.*]] = call ptr @cairn_auto_consistent(ptr %u)
; CHECK-NEXT: [[W:%.*]] = call ptr @cairn_auto_working(ptr %u)
; CHECK-NOT: cairn_main_loop_mark
main:
  %it = phi i64 [ 0, %main.ph ], [ %it.next, %main.latch ]
  call void @cairn_main_loop_mark()
  br label %inner

; CHECK: inner:
; CHECK: [[P1:%.*]] = getelementptr inbounds double, ptr [[C]], i64 %i
; CHECK-NEXT: %a = load double, ptr [[P1]]
; CHECK: [[P2:%.*]] = getelementptr inbounds double, ptr [[W]], i64 %i
; CHECK-NEXT: store double %b, ptr [[P2]]
; CHECK-NEXT: call void @observe(i64 %i)
; CHECK-NEXT: [[P3:%.*]] = getelementptr inbounds double, ptr [[W]], i64 %i
; CHECK-NEXT: %c = load double, ptr [[P3]]
; CHECK: [[P4:%.*]] = getelementptr inbounds double, ptr [[W]], i64 %i
; CHECK-NEXT: store double %d, ptr [[P4]]
inner:
  %i = phi i64 [ 0, %main ], [ %i.next, %inner ]
  %p = getelementptr inbounds double, ptr %u, i64 %i
  %a = load double, ptr %p
  %b = fadd double %a, %e
  store double %b, ptr %p
  call void @observe(i64 %i)
  %c = load double, ptr %p
  %d = fmul double %c, %f
  store double %d, ptr %p
  %i.next = add nuw nsw i64 %i, 1
  %ic = icmp ult i64 %i.next, %n
  br i1 %ic, label %inner, label %main.latch

; Each iteration ends with a commit of the next counter value.
; CHECK: main.latch:
; CHECK: %it.next = add nuw nsw i64 %it, 1
; CHECK: call void @cairn_auto_commit(i64 %it.next)
; CHECK-NEXT: br i1 %mc, label %main, label %done.loopexit
main.latch:
  %it.next = add nuw nsw i64 %it, 1
  %mc = icmp slt i64 %it.next, %iters
  br i1 %mc, label %main, label %done.loopexit

; CHECK: done.loopexit:
; CHECK-NEXT: call void @cairn_auto_exit()
done.loopexit:
  br label %done

done:
  ret void
}
